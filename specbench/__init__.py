"""specbench: benchmark and regression-test speculative decoding."""

__version__ = "0.1.0"

from specbench.sampling_params import SamplingParams  # noqa: E402


def __getattr__(name: str):
    # LLM pulls in torch and the models; import it lazily so `specbench --help` stays fast.
    if name == "LLM":
        from specbench.llm import LLM

        return LLM
    raise AttributeError(name)


__all__ = ["LLM", "SamplingParams", "__version__"]
