"""Length statistics, strategy tables, recommendations and batch composition."""
