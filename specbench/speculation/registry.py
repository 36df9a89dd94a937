"""Registry of proposers: per method name its class and the factory that loads it. `none` has no proposer object:
the engine decodes plainly.

The class is registered with the factory so that capabilities are asked of classes, before anything is loaded:
`methods_with(DraftsAhead)` names every method whose class declares it (speculation/capabilities.py). The test
machinery, check and selftest ask this, never a list of method names, so they pick up a new proposer class as
registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.execution_paths import (
    DRAFTS_AHEAD,
    DRAFTS_TREES,
    FORWARD_PATHS,
    LOOP_PATHS,
    SPECULATIVE,
    ExecutionPath,
    MethodGroup,
    proposer_path,
)
from specbench.registry import Registry
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.speculation.capabilities import DraftsAhead, DraftsTrees, Proposer
from specbench.speculation.drafters.draft_model import DraftModelProposer, load_draft_proposer
from specbench.speculation.drafters.eagle.proposer import EagleProposer, load_eagle_proposer
from specbench.speculation.drafters.mtp.loader import load_mtp_proposer
from specbench.speculation.drafters.mtp.proposer import MtpProposer
from specbench.speculation.drafters.ngram import NgramProposer

if TYPE_CHECKING:
    from specbench.attention.backend import AttentionBackend
    from specbench.models.loader import LoadedModel


@dataclass(frozen=True)
class ProposerContext:
    config: EngineConfig
    target: LoadedModel
    attn_backend: AttentionBackend
    dtype: torch.dtype
    device: torch.device
    hooks: PhaseHooks = NO_HOOKS  # what the proposer calls while it builds each draft phase's input


Factory = Callable[[ProposerContext], "Proposer | None"]

# The class behind each method group the engine's own paths name (execution_paths.py sits below the proposers).
_GROUP_CLASSES: dict[MethodGroup, type[Proposer]] = {
    SPECULATIVE: Proposer, DRAFTS_AHEAD: DraftsAhead, DRAFTS_TREES: DraftsTrees}
assert all(group.capability == cls.__name__ for group, cls in _GROUP_CLASSES.items())


class ProposerRegistry(Registry["Proposer | None"]):
    """Method name -> factory, and the class each factory builds (None for `none`)."""

    def __init__(self) -> None:
        super().__init__("speculative method")
        self._classes: dict[str, type[Proposer] | None] = {}

    def register(self, name: str) -> Callable[[Factory], Factory]:
        raise TypeError(f"register proposer {name!r} with register_class(name, cls): its class declares its "
                        "capabilities")

    def register_class(self, name: str, cls: type[Proposer] | None) -> Callable[[Factory], Factory]:
        def wrap(factory: Factory) -> Factory:
            Registry.register(self, name)(factory)
            self._classes[name] = cls
            return factory

        return wrap

    def proposer_class(self, name: str) -> type[Proposer] | None:
        """The class method `name` builds (None: plain decoding); unknown names fail listing the supported ones."""
        self.get(name)
        return self._classes[name]

    def methods_with(self, capability: type[Proposer]) -> tuple[str, ...]:
        """Registered methods whose class is a `capability` (a capability interface or a proposer class), sorted."""
        return tuple(name for name in self.supported()
                     if (cls := self._classes.get(name)) is not None and issubclass(cls, capability))

    def execution_paths(self) -> tuple[ExecutionPath, ...]:
        """Every execution path, method groups resolved: the engine's loop paths, proposer.<method> per registered
        method (registration order), the paths each registered class declares (its own `execution_paths`, for the
        methods whose class is it or a subclass), the engine's forward paths."""
        classes = {name: cls for name, cls in self._classes.items() if cls is not None}  # registration order
        drafted = tuple(ExecutionPath(proposer_path(name), f"{cls.__name__} drafts as {name} ({_source(cls)})",
                                      ("cpu", "cuda"), (name,)) for name, cls in classes.items())
        declaring = dict.fromkeys(base for cls in classes.values() for base in reversed(cls.__mro__)
                                  if vars(base).get("execution_paths"))
        declared = []
        for base in declaring:
            for p in vars(base)["execution_paths"]:
                if p.methods:
                    raise SpecbenchError(f"{base.__name__} declares path {p.name!r} with methods {p.methods}: leave "
                                         f"them (): its methods are those whose class is a {base.__name__}")
                declared.append(replace(p, methods=self.methods_with(base)))
        paths = tuple(self._resolved(p) for p in LOOP_PATHS) + drafted + tuple(declared) + tuple(
            self._resolved(p) for p in FORWARD_PATHS)
        names = [p.name for p in paths]
        if len(set(names)) != len(names):
            raise SpecbenchError(f"execution paths declared twice: {sorted({n for n in names if names.count(n) > 1})}")
        return paths

    def _resolved(self, p: ExecutionPath) -> ExecutionPath:
        if isinstance(p.methods, MethodGroup):
            return replace(p, methods=self.methods_with(_GROUP_CLASSES[p.methods]))
        return p

    def copy(self) -> ProposerRegistry:
        """An independent registry with the same entries (tests register throwaway proposers in one)."""
        out = ProposerRegistry()
        for name in self.supported():
            out.register_class(name, self._classes[name])(self.get(name))
        return out


PROPOSERS = ProposerRegistry()


def methods_with(capability: type[Proposer]) -> tuple[str, ...]:
    """Registered methods whose class declares `capability` (PROPOSERS read at call time)."""
    return PROPOSERS.methods_with(capability)


def execution_paths() -> tuple[ExecutionPath, ...]:
    """Every execution path (PROPOSERS read at call time): what selftest coverage judges and an engine records."""
    return PROPOSERS.execution_paths()


def path_names() -> frozenset[str]:
    return frozenset(p.name for p in execution_paths())


def execution_path(name: str) -> ExecutionPath:
    """The path `name`; unknown names fail listing the registered ones."""
    paths = {p.name: p for p in execution_paths()}
    if name not in paths:
        raise SpecbenchError(f"unknown execution path {name!r}; registered: {', '.join(sorted(paths))}")
    return paths[name]


def _source(cls: type) -> str:
    """A class's file as the path descriptions write it: speculation/drafters/ngram.py."""
    return cls.__module__.removeprefix("specbench.").replace(".", "/") + ".py"


def speculative_methods() -> tuple[str, ...]:
    """Every registered method with a proposer (all but `none`), sorted."""
    return PROPOSERS.methods_with(Proposer)


@PROPOSERS.register_class("none", None)
def _none(ctx: ProposerContext) -> None:
    return None


@PROPOSERS.register_class("ngram", NgramProposer)
def _ngram(ctx: ProposerContext) -> Proposer:
    return NgramProposer(ctx.config.ngram_min, ctx.config.ngram_max, ctx.device)


@PROPOSERS.register_class("draft", DraftModelProposer)
def _draft(ctx: ProposerContext) -> Proposer:
    return load_draft_proposer(ctx)


@PROPOSERS.register_class("eagle", EagleProposer)
def _eagle(ctx: ProposerContext) -> Proposer:
    return load_eagle_proposer(ctx, "eagle")


@PROPOSERS.register_class("eagle3", EagleProposer)
def _eagle3(ctx: ProposerContext) -> Proposer:
    return load_eagle_proposer(ctx, "eagle3")


@PROPOSERS.register_class("mtp", MtpProposer)
def _mtp(ctx: ProposerContext) -> Proposer:
    return load_mtp_proposer(ctx)


def create_proposer(ctx: ProposerContext) -> Proposer | None:
    return PROPOSERS.create(ctx.config.method, ctx)
