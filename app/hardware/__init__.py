"""Hardware detection: ``detect()`` gives a HardwareProfile of this machine."""
