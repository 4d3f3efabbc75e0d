import pandas as pd

from oversmooth.core.plotting import save_figure
import numpy as np

from oversmooth.reporting.figures import figure_3_1, figure_4_1
from oversmooth.reporting.report import table_3_1


def test_table_3_1_warns_when_a_ground_truth_is_not_best():
    results = [
        {"model": "bn-4", "heldout_loss": 2.0, "accuracy_pct": 40.0, "bytes": 10},
        {"model": "bn-256", "heldout_loss": 1.2, "accuracy_pct": 60.0, "bytes": 10},
        {"model": "gt-a", "heldout_loss": 1.0, "accuracy_pct": 70.0, "bytes": 10},
        {"model": "gt-b", "heldout_loss": 1.5, "accuracy_pct": 50.0, "bytes": 10},
    ]
    table = table_3_1(results, ["gt-a", "gt-b"], {"bn-4": 2.1})
    assert table["role"].tolist() == ["bottleneck", "bottleneck", "ground truth", "ground truth"]
    assert table.loc[2, "note"] == ""
    assert table.loc[3, "note"] == "WARNING: not better than bn-256"
    assert table.loc[0, "best_val_loss"] == 2.1


def test_figure_3_1_writes_png_and_pdf(tmp_path):
    log = pd.DataFrame({"tokens_seen": [0, 10, 20], "train_loss": [5.0, 3.0, 2.0], "val_loss": [5.0, 3.1, 2.2]})
    save_figure(figure_3_1({"bn-4": log, "bn-8": log * 0.9}), tmp_path / "f.png", tmp_path / "f.pdf")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"


def test_the_same_figure_is_saved_as_the_same_bytes(tmp_path):
    log = pd.DataFrame({"tokens_seen": [0, 10, 20], "train_loss": [5.0, 3.0, 2.0], "val_loss": [5.0, 3.1, 2.2]})
    for name in ("a", "b"):  # a PDF's creation date would differ, seconds apart
        save_figure(figure_3_1({"bn-4": log}), tmp_path / f"{name}.png", tmp_path / f"{name}.pdf")
    for suffix in (".png", ".pdf"):
        assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes(), suffix
    assert b"CreationDate" not in (tmp_path / "a.pdf").read_bytes()  # equal bytes within one second prove little


def test_table_3_1_keeps_the_token_level_loss_only_where_a_model_has_one():
    results = [
        {"model": "bn-4", "heldout_loss": 2.0, "accuracy_pct": 30.0, "bytes": 10},
        {"model": "gt-tok", "heldout_loss": 0.8, "token_level_loss": 0.85, "accuracy_pct": 70.0, "bytes": 10},
    ]
    table = table_3_1(results, ["gt-tok"], {"bn-4": 2.1})
    assert table["token_level_loss"].isna().tolist() == [True, False]
    assert "token_level_loss" not in table_3_1(results[:1], [], {"bn-4": 2.1}).columns


def test_figure_4_1_shows_a_prompt_and_bytes_with_dollar_signs_as_text(tmp_path):
    """A prompt's text is data: "paid $16,179,100 ... $123,969" once made matplotlib parse it as math and fail the
    figure job (Figure 7.1 of a demo), once its title wrapped over three panels."""
    probs = np.full(256, 1 / 256)
    probs[ord("$")] = 0.5
    probs /= probs.sum()
    models = ("svd-r4", "svd-r32", "bn-256")  # three panels: the title wraps, and each line was parsed
    figure = figure_4_1(dict.fromkeys(models, probs), ord("$"), {m: m for m in models},
                        "the redemption at par $16,179,100 of the 3 1/2 per cent \"continued\" bonds, making a total of bonds "
                        "redeemed or which have ceased to bear interest during the year of $123,969,65", top_bytes=4,
                        label="Figure 7.1")
    assert r"par \$16,179,100 " in figure.get_suptitle()  # escaped: drawn as "$"
    save_figure(figure, tmp_path / "figure_4_1.png", tmp_path / "figure_4_1.pdf")
    assert (tmp_path / "figure_4_1.png").stat().st_size > 1000 and (tmp_path / "figure_4_1.pdf").stat().st_size > 1000
