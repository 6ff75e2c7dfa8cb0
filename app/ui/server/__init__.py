"""The Local server page."""
