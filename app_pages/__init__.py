"""The lab's pages: one thin file each (widgets -> packing_core -> figure); shared helpers in _lab.

Not named ``pages/``: Streamlit treats a ``pages/`` folder next to the main script as a legacy
multipage app and runs a page file on its own (no app.py, no sidebar) until st.navigation
has run once in the process, e.g. for the first request after a restart, and in every AppTest run.
"""
