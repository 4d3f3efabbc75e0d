"""The bottlenecked GPT, its training and checkpoints, and every compared model behind one interface."""
