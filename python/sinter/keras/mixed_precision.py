"""keras.mixed_precision: "float32" (default) or "mixed_bfloat16" (sn_compile_opts's
mixed_bfloat16: bfloat16 arithmetic on CPUs with AVX512-BF16 where it is faster than float32,
float32 on the others; docs/kernels.md). Set it before compile."""


class DTypePolicy:
    def __init__(self, name="float32"):
        if name not in ("float32", "mixed_bfloat16"):
            raise NotImplementedError(f"dtype policy {name!r}: sinter supports 'float32' and "
                                      "'mixed_bfloat16'")
        self.name = name

    def __repr__(self):
        return f'<DTypePolicy "{self.name}">'


Policy = DTypePolicy
_policy = DTypePolicy()


def set_global_policy(policy):
    global _policy
    _policy = policy if isinstance(policy, DTypePolicy) else DTypePolicy(policy)


def global_policy():
    return _policy
