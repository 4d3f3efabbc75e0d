"""Display names of the oversmoothing metrics and decoding methods, as the tables and figures print them. Apart
from the modules that compute them (`metrics`, `decoding`: torch), so that a table or figure job loads no torch."""

from __future__ import annotations

METRIC_LABELS = {"tto": "TTO", "nsmd": "NSMD", "tv": "TV", "kl": "KL", "kl_eps": "KL_eps", "entropy_diff": "Entropy difference"}
METHOD_LABELS = {"pure": "Pure", "greedy": "Greedy", "top_k": "Top-K", "top_p": "Top-P", "temperature": "Temp.",
                 "epsilon": "Epsilon", "eta": "Eta", "typical": "Typical", "min_p": "Min-P",
                 "ba_epsilon": "BA-Epsilon", "ba_eta": "BA-Eta", "mirostat": "Mirostat"}
