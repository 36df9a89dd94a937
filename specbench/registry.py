"""Name -> factory registries for plug points (proposers, backends, workloads)."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from specbench.errors import SpecbenchError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def wrap(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return wrap

    def supported(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._factories[name]
        except KeyError:
            raise SpecbenchError(
                f"unknown {self.kind} {name!r}; supported: {', '.join(self.supported())}"
            ) from None

    def create(self, name: str, *args, **kwargs) -> T:
        return self.get(name)(*args, **kwargs)

    def __contains__(self, name: str) -> bool:
        return name in self._factories
