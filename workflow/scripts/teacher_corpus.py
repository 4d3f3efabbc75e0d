"""Snakemake adapter: a teacher ground truth's documents, the text of a `teacher` source (rule teacher_corpus)."""

import torch

from oversmooth.bytelm import GPTByteLM, inference_device
from oversmooth.checkpoints import load_model
from oversmooth.logs import log_to_file
from oversmooth.sampling import GPTStepper
from oversmooth.teacher import TeacherSpec, write_teacher_documents

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    torch.set_num_threads(smk.threads)
    source, model = smk.params.source, smk.wildcards.model
    spec = TeacherSpec(source["documents"], source["document_bytes"], source["start_byte"], source["batch_size"])
    teacher = GPTByteLM(model, load_model(smk.input.checkpoint, inference_device()))
    write_teacher_documents(GPTStepper(teacher), spec, model, smk.params.seed, smk.output[0])
