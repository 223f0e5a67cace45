"""Packing Lab core: lengths -> Plan -> metrics, or PackedBatch -> attention -> verification.

No Streamlit import anywhere in this package.
"""
