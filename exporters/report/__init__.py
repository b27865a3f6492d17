"""The HTML report: one self-contained page of a run's records, events and diagnosis (`lanewatch report`)."""
