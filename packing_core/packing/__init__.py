"""Lengths -> Plan: the strategies and their metrics (numpy only)."""
