"""Snakemake adapter: a teacher ground truth's documents, the text of a `teacher` source (rule teacher_corpus)."""

from oversmooth.core.logs import log_to_file
from oversmooth.generation.sampling import stepper_for
from oversmooth.generation.teacher import TeacherSpec, write_teacher_documents
from oversmooth.workflow.rules import rule_byte_lm

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    source, model = smk.params.source, smk.wildcards.model
    spec = TeacherSpec(source["documents"], source["document_bytes"], source["start_byte"], source["batch_size"])
    # trained here (its checkpoint), or a pretrained token or byte LM (its folder); the truth: under the source's
    # decoding, if it has one (params.truth_decoding)
    truth = rule_byte_lm(smk)
    write_teacher_documents(stepper_for(truth), spec, model, smk.params.seed, smk.output[0])
