"""The models' pages: Discover (find a model that fits), Downloads (fetch it), Library (what is on this computer), and
the first run's welcome, which is made of Discover's cards."""
