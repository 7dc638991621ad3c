"""The toy RL testbed: the paper's pipeline at toy scale, on a CPU (issue 16).

A family of integer-arithmetic tasks with graded difficulty (:mod:`~bots_verl.toy.tasks`), a character tokenizer with
a chat template verl can apply (:mod:`~bots_verl.toy.tokenizer`), tiny Llama models (:mod:`~bots_verl.toy.model`)
warmed up by supervised training on CPU (:mod:`~bots_verl.toy.warmup`), exact pass rates from one forward pass
(:mod:`~bots_verl.toy.likelihood`), and one entry point that builds every artifact the verl runs need
(``python -m bots_verl.toy.prepare``). The scorer is :mod:`bots_verl.rewards.arith_reward`.
"""
