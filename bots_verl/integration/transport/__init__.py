"""Selection transport: the selector service (a named Ray actor), the client that calls it across the Ray hop, the
dispatch-order sampler that hands its selections to verl's dataloader, the sampler's checkpoint state, and the
in-flight ledger of the asynchronous modes.

The hop, in one line: ``BOTSSampler`` -> ``SelectorClient`` -> ``ray.get(SelectorActor.<method>.remote(...))`` ->
``SelectorService`` -> a :mod:`bots_verl.core` selector.
"""
