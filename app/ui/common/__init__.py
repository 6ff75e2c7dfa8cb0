"""What every page shares: the look (theme, icons, focus ring), the widgets pages are built from, numbers and dates in
words, the languages, and work off the GUI thread. Imports no page."""
