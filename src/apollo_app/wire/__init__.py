"""Apollo's wire format: the JSON codec, bus command envelopes and RPC replies."""
