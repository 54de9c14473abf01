"""The leg graph while a flow runs: which leg instances exist, which may start, what each
one sees, and how each ended. No I/O except reading a fan-out's artifact file.

A flow-file leg becomes its instances when every leg it depends on has ended: one
instance, or for ``for_each`` one per item (``<id>[i]``; zero items is an instance-less
leg recorded as such), or a leg not run because a dependency did not complete. On
resume, an instance that completed before is taken as it was (``reused``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lirun.flows.decide import NOT_RUN, LegFact
from lirun.flows.fanout import FanOutError, expand_items, instance_id
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.flows.templates import RenderStopped, TemplateError, render
from lirun.orchestra.graph import ancestors, comparable_to_all, ready, topo_order

__all__ = ["SUCCESS", "FlowState", "Instance", "RenderStopped", "ReusedLeg", "TemplateError"]

SUCCESS = frozenset({"completed", "completed_empty"})
PENDING, RUNNING, DONE = "pending", "running", "done"


@dataclass(frozen=True, slots=True)
class ReusedLeg:
    """A leg instance that completed in the invocation being resumed: taken as it was."""

    session_id: str
    status: str
    reason_code: str | None
    item: str | None
    duration_s: float | None
    outputs: Mapping[str, Any]
    proof_shared: bool = False  # it counted completed_empty there (``proof_is_shared``)
    pruned_at: float | None = None  # ``li gc`` removed its reply and files: not reusable


@dataclass(slots=True)
class Instance:
    """One leg instance and how far it got."""

    id: str
    leg: LegSpec
    item: str | None = None
    state: str = PENDING  # pending | running | done (ran, reused, or not run)
    status: str | None = None  # a session status, or NOT_RUN
    reason_code: str | None = None
    session_id: str | None = None
    attempts: int = 0
    reused: bool = False
    duration_s: float | None = None
    cost_usd: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    because: str | None = None
    proof_shared: bool = False
    interrupted: bool = False  # stopped by the flow (signal, deadline, fail_fast)
    message: str | None = None  # the provider's own words when it failed

    def fact(self) -> LegFact:
        return LegFact(
            id=self.id,
            status=self.status or NOT_RUN,
            reason_code=self.reason_code,
            may_be_empty=self.leg.may_be_empty,
            proof_shared=self.proof_shared,
            because=self.because,
            interrupted=self.interrupted,
            error=self.error,
            message=self.message,
        )

    @property
    def error(self) -> str | None:
        """Why a leg without a session failed (its items or its template), if it did."""
        if self.session_id is not None or self.reused:
            return None
        error = self.outputs.get("error")
        return str(error) if error else None

    def graph_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.id,
            "leg": self.leg.id,
            "item": self.item,
            "depends_on": list(self.leg.depends_on),
        }
        if self.reused:
            entry["reused_from"] = self.session_id
        if self.status == NOT_RUN:
            entry.update(not_run=self.reason_code, because=self.because)
        elif self.state == DONE and self.session_id is None and not self.reused:
            # no session: a fan-out with no items or unreadable ones, a leg not set up
            entry.update(status=self.status, reason_code=self.reason_code)
            if self.error:
                entry["error"] = self.error
        return entry


class FlowState:
    """A flow's runtime state: the instances of every leg, in graph order, as they come
    to exist, and how far each has got."""

    def __init__(
        self,
        spec: FlowSpec,
        *,
        parallel: int,
        reuse: Mapping[str, ReusedLeg] | None = None,
    ) -> None:
        self.spec = spec
        self.parallel = parallel
        self.reuse = dict(reuse or {})
        self.deps = {leg.id: tuple(leg.depends_on) for leg in spec.legs}
        self.order = topo_order(self.deps)
        self.legs = {leg.id: leg for leg in spec.legs}
        self.instances: dict[str, list[Instance]] = {}
        self.fan_out_sizes: dict[str, int] = {}
        self._ancestors: dict[str, set[str]] = {}  # filled as legs render
        alone = comparable_to_all(self.deps)  # linear: a 10,000-leg chain plans at once
        self._unrelated = {a: a not in alone for a in self.order}

    # -- state questions --

    def all_instances(self) -> Iterator[Instance]:
        for leg_id in self.order:
            yield from self.instances.get(leg_id, ())

    def settled(self, leg_id: str) -> bool:
        found = self.instances.get(leg_id)
        return found is not None and all(i.state == DONE for i in found)

    def failed_instance(self, leg_id: str) -> Instance | None:
        """The first instance of a settled leg that did not complete, if any."""
        for inst in self.instances.get(leg_id, ()):
            if inst.status not in SUCCESS:
                return inst
        return None

    def pending(self) -> list[Instance]:
        return [i for i in self.all_instances() if i.state == PENDING]

    def unmaterialized(self) -> list[str]:
        return [leg_id for leg_id in self.order if leg_id not in self.instances]

    def beside(self, leg_id: str, count: int) -> bool:
        """Whether an instance of this leg may run while another leg runs."""
        return self.parallel > 1 and (count > 1 or self._unrelated[leg_id])

    def facts(self) -> list[LegFact]:
        return [i.fact() for i in self.all_instances()]

    def graph(self) -> list[dict[str, Any]]:
        return [i.graph_entry() for i in self.all_instances()]

    # -- growth --

    def materialize(self) -> list[Instance]:
        """Create the instances of every leg whose dependencies have all ended; return
        the new ones (pending, reused or not run)."""
        created: list[Instance] = []
        unmade = (leg_id for leg_id in self.order if leg_id not in self.instances)
        for leg_id in ready(unmade, self.deps, self.settled):
            created.extend(self._materialize(self.legs[leg_id]))
        return created

    def _materialize(self, leg: LegSpec) -> list[Instance]:
        for dep in leg.depends_on:
            bad = self.failed_instance(dep)
            if bad is not None:
                return self._set(leg.id, [self._not_run(leg, "run.cancelled.dependency", bad.id)])
        if leg.for_each is None:
            return self._set(leg.id, [self._instance(leg, leg.id, None)])
        try:
            items = self._items(leg)
        except FanOutError as exc:
            inst = Instance(leg.id, leg, state=DONE, status="failed")
            inst.reason_code, inst.outputs = "run.failed.fan_out", {"error": str(exc)}
            return self._set(leg.id, [inst])
        self.fan_out_sizes[leg.id] = len(items)
        if not items:
            inst = Instance(leg.id, leg, state=DONE, status="completed_empty")
            inst.reason_code = "run.completed_empty.no_items"
            return self._set(leg.id, [inst])  # itemless: the join sees []
        made = [self._instance(leg, instance_id(leg.id, n), item) for n, item in enumerate(items)]
        return self._set(leg.id, made)

    def _set(self, leg_id: str, made: list[Instance]) -> list[Instance]:
        self.instances[leg_id] = made
        return made

    def _instance(self, leg: LegSpec, inst_id: str, item: str | None) -> Instance:
        inst = Instance(inst_id, leg, item)
        before = self.reuse.get(inst_id)
        if before is not None and before.item == item:
            inst.state, inst.reused = DONE, True
            inst.status, inst.reason_code = before.status, before.reason_code
            inst.session_id, inst.duration_s = before.session_id, before.duration_s
            inst.outputs = dict(before.outputs)
            inst.proof_shared = before.proof_shared
        return inst

    @staticmethod
    def _not_run(leg: LegSpec, reason: str, because: str | None) -> Instance:
        inst = Instance(leg.id, leg, state=DONE, status=NOT_RUN, reason_code=reason)
        inst.because = because
        return inst

    def stop_rest(self, reason: str) -> list[Instance]:
        """Every pending instance and every leg not yet materialized becomes not run."""
        stopped = []
        for inst in self.pending():
            inst.state, inst.status, inst.reason_code = DONE, NOT_RUN, reason
            stopped.append(inst)
        for leg_id in self.unmaterialized():
            stopped.extend(self._set(leg_id, [self._not_run(self.legs[leg_id], reason, None)]))
        return stopped

    # -- what a leg sees --

    def outputs(self, leg_id: str) -> Any:
        found = self.instances.get(leg_id, [])
        if self.legs[leg_id].for_each is not None:
            return [i.outputs for i in found if i.item is not None]
        return found[0].outputs if found else {}

    def _items(self, leg: LegSpec) -> list[str]:
        assert leg.for_each is not None
        source = leg.for_each.artifact
        if leg.for_each.items is not None or source is None:
            return expand_items(leg.for_each)
        dep, _, artifact = source.partition(".")
        outputs = self.outputs(dep) if dep in self.legs else None
        if not isinstance(outputs, Mapping):
            raise FanOutError(f"for_each: {source} does not name one leg's artifact")
        path = (outputs.get("artifacts") or {}).get(artifact)
        return expand_items(leg.for_each, path)

    def context(self, inst: Instance) -> dict[str, Any]:
        above = self._ancestors.get(inst.leg.id)
        if above is None:
            above = self._ancestors[inst.leg.id] = ancestors(self.deps, inst.leg.id)
        legs = {a: self.outputs(a) for a in above}
        context: dict[str, Any] = {"vars": dict(self.spec.vars), "legs": legs}
        if inst.item is not None:
            context["item"] = inst.item
        return context

    def rendered(
        self, inst: Instance, *, should_stop: Callable[[], bool] | None = None
    ) -> tuple[str | None, list[str] | None]:
        """The instance's prompt and a command's arguments, rendered (TemplateError;
        RenderStopped when ``should_stop()`` turns true meanwhile)."""
        task = inst.leg.task
        context: dict[str, Any] | None = None

        def one(text: str) -> str:
            nonlocal context
            if "{" not in text:  # most arguments: no template, no render
                return text
            context = context if context is not None else self.context(inst)
            return render(text, context, should_stop=should_stop)

        prompt = one(task.prompt) if task.prompt is not None else None
        argv = [one(arg) for arg in task.run] if task.run is not None else None
        return prompt, argv
