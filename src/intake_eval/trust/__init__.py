"""Trusting the instrument: patient QC before a study, human annotation against the judges."""
