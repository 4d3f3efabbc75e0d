"""Display names of the oversmoothing metrics, decoding methods and representations, as the tables and figures print
them. Apart from the modules that compute them (`analysis.rank`: torch), so that a table or figure job loads no
torch."""

from __future__ import annotations

METRIC_LABELS = {"tto": "TTO", "nsmd": "NSMD", "tv": "TV", "kl": "KL", "kl_eps": "KL_eps", "entropy_diff": "Entropy difference"}
METHOD_LABELS = {"pure": "Pure", "greedy": "Greedy", "top_k": "Top-K", "top_p": "Top-P", "temperature": "Temp."}
# The representations whose ranks thesis §7.2 measures (`analysis.rank.representations`), in Table 7.3's order
REPRESENTATION_LABELS = {
    "logits": "Logits",
    "probabilities": "Probabilities",
    "post_bottleneck": "Post-bottleneck",
    "pre_bottleneck": "Pre-bottleneck",
}
