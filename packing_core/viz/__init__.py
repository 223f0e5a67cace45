"""Plotly figure builders: pure functions from plans, batches and reports to figures."""
