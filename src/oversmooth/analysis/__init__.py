"""Oversmoothing metrics, TBAT, unargmaxable classes, timings, ranks, and the token track's heads."""
