"""Packing Lab: entry point. Routes to the pages; the lab's logic lives in packing_core."""
import streamlit as st

st.set_page_config(page_title="Packing Lab", layout="wide")
st.title("Packing Lab")
st.write("Pages are being added.")
