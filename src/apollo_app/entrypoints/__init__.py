"""Apollo's entry points: the HTTP API and the bus service (``apollo serve`` runs both)."""
