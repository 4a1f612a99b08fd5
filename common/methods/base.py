"""What a method is: its name, what it can do (:class:`Capabilities`), its method-only command
line options (:class:`Option`) and its operations.

A method (LKC-privacy with its plug-in models, DiffGen, (k, k^m)-anonymity) is one object
(:class:`Method`) living in its own package (``fedanon.lkc.method``, ``fedanon.dp.method``,
``fedanon.kkm.method``) and named in :mod:`fedanon.methods.registry`, the one place that maps
``[privacy] model`` to a method.  The commands (``anonymize``, ``audit``, ``evaluate``,
``experiment``) and the federation ask the registry for the method of a spec and call its
operations; what a method cannot do is refused from its capabilities, here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError

COMMANDS = ("anonymize", "audit", "evaluate", "experiment")


def print_metrics(text: str, doc: Any, json_path: Path | None) -> int:
    """The end of ``fedanon evaluate``: prints the metrics' ``text`` and writes their JSON
    ``doc`` to ``--json`` when given; exit 0."""
    from fedanon.io.fsutil import atomic_write

    print(text)
    if json_path is not None:
        atomic_write(json_path, lambda fh: json.dump(doc, fh, indent=2))
    return 0


def seed_value(text: str) -> int:
    """``--seed N`` of a method that draws: an integer >= 0 (argparse's type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the seed must be >= 0")
    return value


@dataclass(frozen=True)
class Capabilities:
    """What a method can do.  ``federated``: a federated variant (``leader run``, ``federate``);
    ``auditable``: a released table can be recounted (``audit``); ``set_valued``: set-valued
    QIDs (``type = "set"``); ``batched_rounds``: several specializations per federated round;
    ``evaluable``: ``fedanon evaluate`` measures its releases; ``python_api``: runs from
    :func:`fedanon.anonymize`."""

    federated: bool
    auditable: bool
    set_valued: bool = False
    batched_rounds: bool = False
    evaluable: bool = True
    python_api: bool = True


def positive_count(text: str) -> int:
    """An argparse type: an integer >= 1 (``--rows``, ``--runs``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}; expected e.g. 1000") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (value {text!r})")
    return value


def non_negative_number(text: str) -> float:
    """An argparse type: a finite number >= 0 (``--ccp-alpha``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}; expected e.g. 3e-4") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a finite number >= 0 (value {text!r}); expected e.g. 0 or 3e-4"
        )
    return value


@dataclass(frozen=True)
class Option:
    """A method-only option of a command: ``flags`` and the ``argparse`` keyword arguments.
    Its default must be None or False, so that a value given for another method's spec can be
    told apart and refused."""

    command: str
    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise ValueError(f"unknown command {self.command!r}")
        if self.kwargs.get("default") not in (None, False):
            raise ValueError(f"{self.flags[0]}: a method-only option defaults to None or False")

    @property
    def flag(self) -> str:
        return self.flags[0]

    @property
    def dest(self) -> str:
        return str(self.kwargs.get("dest") or self.flag.lstrip("-").replace("-", "_"))

    def given(self, args: argparse.Namespace) -> bool:
        return getattr(args, self.dest, None) not in (None, False)


class Method:
    """One anonymization method.  Subclasses set the class attributes and override the
    operations they support; the others refuse with :meth:`refuse` (exit 2)."""

    name: str = ""
    title: str = ""  # "LKC-privacy"
    spec_phrase: str = ""  # "an LKC spec": what a method-only option's refusal names
    capabilities: Capabilities = Capabilities(federated=False, auditable=False)
    options: tuple[Option, ...] = ()
    experiments: tuple[str, ...] = ()  # the names `fedanon experiment NAME` runs
    not_federated: str = ""  # why there is no federated variant (the exit-2 message)
    not_auditable: str = ""  # why a table cannot be recounted
    deprecated: tuple[str, ...] = ()  # its old commands, hidden aliases for one release

    def __repr__(self) -> str:
        return f"<method {self.name}>"

    def refuse(self, what: str, source: str | None = None) -> SpecError:
        return SpecError(
            f"{self.title} ([privacy] model = {self.name!r}) does not support {what}",
            file=source,
            column="privacy.model",
            value=self.name,
        )

    def check_spec(self, run_spec: Any) -> None:
        """What the method adds to the validation of a parsed spec (SpecError); the LKC
        family: nothing beyond the spec reader's."""
        del run_spec

    # -- the one spec (fedanon.Spec: the common attributes + this method's parameter section,
    # from which the method derives its view: the engine's RunSpec by default) ------------

    def parse_view(self, text: str, source: str) -> Any:
        """This method's view of spec text (SpecError naming ``source``), before the
        :class:`fedanon.Spec` is made of it; by default the run spec the engine reads."""
        from fedanon.model.spec import parse_spec

        run_spec = parse_spec(text, source, self.capabilities.set_valued)
        self.check_spec(run_spec)
        return run_spec

    def spec_view(self, spec: Any) -> Any:
        """This method's view of a :class:`fedanon.Spec` (validated: SpecError); by default
        the run spec (:class:`fedanon.model.spec.RunSpec`) of its privacy section,
        ``to_privacy()``, its score and its attributes."""
        from fedanon.model.spec import RunSpec

        for a in spec.attributes:
            if a.weight is not None:
                raise SpecError(
                    f"attribute {a.name!r}: weight is not read by {self.title}",
                    file=spec.source,
                    value=str(a.weight),
                )
        run_spec = RunSpec(
            privacy=spec.privacy.to_privacy(),
            score=str(spec.score),
            attributes=tuple(a.to_attribute_spec() for a in spec.attributes),
            source=spec.source,
            set_valued=self.capabilities.set_valued,
        )
        self.check_spec(run_spec)
        return run_spec

    def spec_parts(self, view: Any) -> tuple[Any, list[dict[str, Any]], str | None]:
        """A parsed view as the :class:`fedanon.Spec` made of it: its parameter section (None:
        the engine's ``[privacy]``, made by :mod:`fedanon.apispec`), each attribute's keys of
        the one attribute model, and the score."""
        return None, [dict(a.__dict__) for a in view.attributes], view.score

    def default_score(self, model: str) -> str | None:
        """``[utility] score`` of a spec naming none (None: the method has no score)."""
        from fedanon.model.privacy import default_score

        return default_score(model)

    # -- the command line operations (arguments as parsed by fedanon.cli; ``spec``: the
    # parsed fedanon.Spec of the spec file, parsed once by the command) -----------------

    def anonymize(self, args: argparse.Namespace, spec: Any) -> int:
        """``fedanon anonymize``: read, run, publish the table and report (both or neither)."""
        raise self.refuse("a centralized run", str(args.spec))

    def audit(self, args: argparse.Namespace, spec: Any) -> dict[str, Any]:
        """``fedanon audit``: recount a released table; prints the summary and returns the
        result document (``ok`` False: a violation, exit 3)."""
        raise SpecError(self.not_auditable, file=str(args.spec), value=self.name)

    def evaluate(self, args: argparse.Namespace, spec: Any) -> int:
        """``fedanon evaluate``: utility of a released table."""
        raise self.refuse("`fedanon evaluate`", str(args.spec))

    def experiment_spec(self, args: argparse.Namespace) -> Path:
        """The base spec of ``fedanon experiment`` (``--spec`` or the bundled one)."""
        raise self.refuse("`fedanon experiment`")

    def experiment(self, args: argparse.Namespace, spec: Any) -> int:
        """``fedanon experiment NAME`` for one of :attr:`experiments`: runs it
        (:meth:`run_experiment`) and prints the files it wrote, one a line."""
        for path in self.run_experiment(args, spec):
            print(path)
        return 0

    def run_experiment(self, args: argparse.Namespace, spec: Any) -> Sequence[Path]:
        """Runs experiment ``args.name`` on the base ``spec``; the files it wrote."""
        raise self.refuse("`fedanon experiment`")

    def new_spelling(self, command: str, rest: list[str]) -> list[str]:
        """The arguments of today's command for one of :attr:`deprecated` (``rest``: what
        followed the old command's name)."""
        raise ValueError(f"{command!r} is not an old command of {self.name!r}")

    # -- the Python API (fedanon.api; ``data``: a DataFrame or a file path) ----------------

    def api_anonymize(
        self, data: Any, run_spec: Any, reader: Any, seed: int | None, expand: bool
    ) -> tuple[Any, dict[str, Any], Any]:
        """The release as a DataFrame, its report, and its own writer (None: the API's CSV
        publisher)."""
        raise self.refuse("the Python API", getattr(run_spec, "source", None))

    def api_audit(self, table: Any, run_spec: Any, sep: str, limit: int) -> Any:
        """The recount of a released table (:class:`fedanon.privacy.audit.AuditResult`)."""
        raise SpecError(self.not_auditable, file=getattr(run_spec, "source", None), value=self.name)

    def require_federated(self, source: str | None) -> None:
        """SpecError (exit 2) with :attr:`not_federated` when there is no federated variant."""
        if not self.capabilities.federated:
            raise SpecError(
                self.not_federated, file=source, column="privacy.model", value=self.name
            )

    def options_of(self, command: str) -> tuple[Option, ...]:
        return tuple(o for o in self.options if o.command == command)

    # -- the federated operations (``spec``: the run spec, a parsed
    # :class:`fedanon.model.spec.RunSpec` whose ``[privacy] model`` names this method) ----------

    # "module:attr" of its leader side (the rounds and the release of a federated run), in
    # fedanon.leader, whose network layers a method package may not import; loaded by
    # fedanon.methods.registry.leader_side
    leader_side: str = ""

    def run_hash(self, spec: Any, files: dict[str, str]) -> bytes:
        """What a federated run is bound to (the parties answer Prepare with it)."""
        from fedanon.model.spec import run_hash

        return run_hash(spec, files)

    def admit_model(self, policy: Any, model: str) -> None:
        """A hospital's policy on the spec text's model name, before the spec is parsed or
        a plug-in imported (:meth:`fedanon.security.policy.PartyPolicy.check_model`)."""
        policy.check_model(model)

    def check_policy(self, policy: Any, spec: Any) -> None:
        """The method's rules of a hospital's ``[policy]`` (PolicyRefused): its equivalent
        of the floors (LKC: min_K, min_L, max_C; DiffGen: max_epsilon)."""
        raise self.refuse("a federated run", getattr(spec, "source", None))

    def policy_default(self, policy: Any) -> bool:
        """Whether a policy without ``allowed_models`` joins runs of this method."""
        del policy
        return False

    def policy_incomplete(self, policy: Any) -> str | None:
        """What a policy listing this method in ``allowed_models`` lacks (None: nothing)."""
        del policy
        return None

    def local_policy(self, spec: Any) -> Any:
        """The policy of `fedanon federate`'s daemons (one owner wrote the spec and holds
        every table): exactly this spec allowed."""
        raise self.refuse("a federated run", getattr(spec, "source", None))

    def schema(self, spec: Any, reader: Any) -> Any:
        """What the spec and its taxonomy files define before any data is read
        (:class:`fedanon.io.table.Schema`), the same at the leader and at every hospital;
        its ``files`` are shipped to the hospitals and bind the run hash."""
        from fedanon.io.table import build_schema

        return build_schema(spec, reader)

    def party_table(self, spec: Any, schema: Any, table: Any, source: Any) -> Any:
        """A hospital's table as :meth:`new_party` takes it, from the encoded ``table`` and
        the data ``source`` it was read from (what the encoder does not read: DiffGen's
        diagnosis codes); the encoded table itself by default."""
        del spec, schema, source
        return table

    def new_party(self, spec: Any, schema: Any, table: Any) -> Any:
        """A hospital's engine party for this run (:class:`fedanon.tds.party.EngineParty`)."""
        raise self.refuse("a federated run", getattr(spec, "source", None))

    def check_own_data(self, policy: Any, spec: Any, table: Any) -> None:
        """Once a hospital's table is read: what its policy asks of its own data."""
        del policy, spec, table

    def party_params(self, spec: Any) -> Any:
        """What a hospital's run keeps beside the spec (DiffGen: its parameters; None)."""
        del spec
        return None

    def accepted_terms(self, spec: Any, policy: Any) -> tuple[str, str, str]:
        """The accepted-run log line's terms: (model and parameters, the columns released
        unchanged, what the confidence bound binds) -- spec values, never record values."""
        raise self.refuse("a federated run", getattr(spec, "source", None))
