"""Apollo's adapters: one package per technology behind the domain's ports."""
