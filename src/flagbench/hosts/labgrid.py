"""Places of a labgrid lab, held for one run through labgrid's own client API.

    with Lab.connect(say) as lab:                  # the coordinator of LG_COORDINATOR, the
                                                   # environment config of LG_ENV (if set)
        lease = lab.lease("board-7", wait_s=600)   # or "arch=aarch64": any place with that tag
        lease.power_on()
        conn = Connection(lease.dest, ssh=lease.ssh)   # hosts/ssh.py: only hosts/ opens ssh
        ...
        lease.release()                            # also on failure and after a signal

A place is taken as a labgrid user takes one by hand: a reservation (`labgrid-client reserve
name=PLACE`) queues behind the other users' reservations and places in use; the run waits
for its turn, at most `wait_s`, saying who holds the place and for how long; then the place
is acquired. Power goes through the target's PowerProtocol driver (the environment config's,
else one made for a power resource of the place, as `labgrid-client power` does); the shell
is the place's NetworkService, reached with flagbench's ssh client (the user's ssh config,
FLAGBENCH_SSH), not labgrid's SSHDriver.

A run killed with -9 cannot release anything: each lease is noted in <cache>/labgrid/ (the
coordinator, the place, the reservation, the run's owner token); `Lab.open()`, at the start of
the next run, releases the places a dead run left acquired by this user and cancels its
reservations, and says so. labgrid itself is an optional dependency (`pip install
'flagbench[lab]'`); without it a --place is bad input naming the package.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from flagbench import procs
from flagbench.errors import UserError
from flagbench.hosts import lab_state
from flagbench.hosts.lab_api import COORDINATOR_VAR, LabError, Quiet, ago, api as _api, coordinator, one_line
from flagbench.hosts.ssh import ssh_command

ENV_VAR = "LG_ENV"
WAIT_S = 600.0                               # for a place someone else holds
POLL_S = 1.0
RPC_S = 30.0                                 # one call to the coordinator
RPC_AFTER_SIGNAL_S = 5.0                     # ... while a signal waits: a run asked to stop stops


def parse_place(spec: str) -> dict[str, str]:
    """A --place word as a reservation filter: NAME, or TAG=VALUE (any place with that tag).

    >>> parse_place("board-7"), parse_place("arch=aarch64")
    ({'name': 'board-7'}, {'arch': 'aarch64'})
    """
    key, sep, value = spec.partition("=")
    if not sep:
        key, value = "name", spec
    _, common, _ = _api()
    if not common.TAG_KEY.match(key) or not common.TAG_VAL.match(value):
        raise UserError(f"--place {spec!r}: not a place name or TAG=VALUE (letters, digits, '-', '_')")
    return {key: value}


def describe(filt: dict[str, str]) -> str:
    return filt["name"] if list(filt) == ["name"] else " ".join(f"{k}={v}" for k, v in filt.items())


class Lab:
    """One labgrid client session with the coordinator (and the environment config, if any)."""

    def __init__(self, address: str, env_file: str | None, say: Callable[[str], None]):
        self.address, self.env_file, self.say = address, env_file, say
        self.session = None
        self.env = None
        self.leases: list[Lease] = []
        self.rpc_s = RPC_S

    @classmethod
    def connect(cls, say: Callable[[str], None] = lambda s: None) -> "Lab":
        lab = cls(coordinator(), os.environ.get(ENV_VAR) or None, say)
        return lab.open()

    def open(self) -> "Lab":
        client, _, _ = _api()
        if self.env_file:
            from labgrid import Environment
            try:
                self.env = Environment(config_file=self.env_file)
            except Exception as e:   # labgrid's own config errors: a file the user wrote
                raise UserError(f"{ENV_VAR}={self.env_file}: {e}") from None
        # labgrid's session runs on an event loop it keeps per thread; flagbench drives it
        self.quiet = Quiet().__enter__()        # labgrid's log lines: kept, not printed before ours
        try:
            self.session = client.start_session(self.address)
        except (client.Error, OSError, ValueError) as e:
            self.quiet.__exit__()
            why = self.quiet.lines[-1] if self.quiet.lines else one_line(e)
            raise LabError(f"labgrid coordinator {self.address} ({COORDINATOR_VAR}): unreachable: {why}") from None
        lab_state.sweep(self)    # what a run killed with -9 left held
        return self

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, kind, *exc) -> None:
        try:
            self.close()
        except LabError as e:
            if kind is None:     # said once, by whoever reports the LabError
                raise
            self.say(str(e))     # the run's own failure is the one reported: this one is said here

    def close(self) -> None:
        """Release every place still held (after a signal too), then end the session; a place
        not released is a LabError (not said here: its one line is the caller's to say)."""
        errors = []
        with procs.after_signal() as signum:
            if signum is not None:
                self.rpc_s = RPC_AFTER_SIGNAL_S
            for lease in list(self.leases):
                try:
                    lease.release()
                except (LabError, UserError) as e:
                    errors.append(str(e))
            if self.session is not None:
                session, self.session = self.session, None
                try:
                    self._run(session.stop(), session)
                    self._run(session.close(), session)
                except Exception:
                    pass
            if getattr(self, "quiet", None) is not None:
                self.quiet.__exit__()
        if errors:
            raise LabError("; ".join(errors))

    # -- talking to the coordinator ---------------------------------------------------------------
    def _run(self, coro, session=None):
        session = session or self.session
        return session.loop.run_until_complete(asyncio.wait_for(coro, self.rpc_s))

    def call(self, method: str, request):
        """One coordinator RPC; its failure is a LabError with the coordinator's words."""
        import grpc
        try:
            return self._run(getattr(self.session.stub, method)(request))
        except grpc.aio.AioRpcError as e:
            raise LabError(f"labgrid coordinator {self.address}: {method}: {e.details()}") from None
        except asyncio.TimeoutError:
            raise LabError(f"labgrid coordinator {self.address}: {method}: no answer in {self.rpc_s:g} s") from None

    def pump(self, seconds: float) -> None:
        """Let the session take the coordinator's updates (places acquired, released) for SECONDS."""
        self.session.loop.run_until_complete(asyncio.sleep(seconds))
        if self.session.stopping.is_set():
            raise LabError(f"labgrid coordinator {self.address}: the connection ended")

    def sync(self) -> None:
        self._run(self.session.sync_with_coordinator())

    @property
    def places(self) -> dict:
        return self.session.places

    @property
    def user(self) -> str:
        """Who this client is to the coordinator: "host/user" (LG_HOSTNAME, LG_USERNAME)."""
        return f"{self.session.gethostname()}/{self.session.getuser()}"

    def matching(self, filt: dict[str, str]) -> list:
        """The places a filter can be given (as the coordinator's scheduler matches them)."""
        out = []
        for name, place in sorted(self.places.items()):
            tags = {**place.tags, "name": name}
            if all(tags.get(k) == v for k, v in filt.items()):
                out.append(place)
        return out

    # -- holding places ---------------------------------------------------------------------------
    def check(self, specs) -> None:
        """Bad input before anything is held: a place the lab does not have, a tag given more
        often than the lab has places with it."""
        filters = [parse_place(spec) for spec in specs]
        for spec, filt in zip(specs, filters):
            found = self.matching(filt)
            if not found:
                known = ", ".join(sorted(self.places)) or "none"
                raise UserError(f"--place {spec}: no place of the lab at {self.address} is "
                                f"{'named so' if 'name' in filt else 'tagged so'} (places: {known})")
            if filters.count(filt) > len(found):
                raise UserError(f"--place {spec} {filters.count(filt)} times: the lab has {len(found)} place(s) "
                                f"so tagged ({', '.join(p.name for p in found)})")

    def lease(self, spec: str, *, wait_s: float = WAIT_S) -> "Lease":
        """Reserve a place for SPEC (a name or TAG=VALUE), wait for it (bounded), acquire it."""
        _, common, pb = _api()
        filt = parse_place(spec)
        request = pb.CreateReservationRequest(filters={"main": pb.Reservation.Filter(filter=filt)}, prio=0.0)
        res = common.Reservation.from_pb2(self.call("CreateReservation", request).reservation)
        lease = Lease(self, spec, filt, res.token)
        self.leases.append(lease)
        lab_state.note_lease(self, lease)       # from here on a kill -9 is undone by the next run
        lease.wait(wait_s)
        lease.acquire()
        return lease

    def target(self, place: str):
        """labgrid's Target for an acquired place: the environment config's role whose
        RemotePlace names it, else a bare target holding the place's resources."""
        from labgrid import Target
        from labgrid.remote.client import find_role_by_place
        from labgrid.resource.remote import RemotePlace, RemotePlaceManager

        procs.adopt_environment()   # a driver's own programs (QEMUDriver's qemu) end with flagbench
        manager = RemotePlaceManager.get()
        manager.session, manager.loop = self.session, self.session.loop
        try:
            if self.env is not None:
                role = find_role_by_place(self.env.config.get_targets(), place)
                if role is not None:
                    return self.env.get_target(role)
            target = Target(place, env=self.env)
            RemotePlace(target, name=place)
            return target
        except Exception as e:     # an exporter gone, a driver the config names wrongly
            raise LabError(f"place {place}: labgrid cannot make its target: {e}") from None


@dataclass
class Lease:
    """One place held for this run: reserved, then acquired; released once."""
    lab: Lab
    spec: str
    filt: dict
    token: str
    place: str = ""
    waited: float = 0.0
    acquired: bool = False
    changed: float | None = None     # the coordinator's time of our acquisition
    target: object = None
    notes: list = field(default_factory=list)

    def wait(self, wait_s: float) -> None:
        """Until the coordinator gives the reservation a place; says who holds it meanwhile."""
        _, common, pb = _api()
        started = time.monotonic()
        told = None
        while True:
            res = common.Reservation.from_pb2(
                self.lab.call("PollReservation", pb.PollReservationRequest(token=self.token)).reservation)
            if res.state in (common.ReservationState.allocated, common.ReservationState.acquired):
                self.place = res.allocations["main"][0]
                break
            if res.state is not common.ReservationState.waiting:
                raise LabError(f"place {self.spec}: reservation {self.token} is {res.state.name}")
            waited = time.monotonic() - started
            who, holders = self.holders()
            if who != told:
                self.lab.say(f"place {self.spec}: waiting for it ({holders}; at most {wait_s:g} s)")
                told = who
            if waited > wait_s:
                raise LabError(f"place {self.spec}: still {holders} after waiting {waited:.0f} s "
                               "(--place-wait to wait longer); nothing was measured there")
            self.lab.pump(POLL_S)
        self.waited = time.monotonic() - started
        if told is not None:
            self.lab.say(f"place {self.place}: ours after waiting {self.waited:.0f} s")
            self.notes.append(f"place {self.place}: waited {self.waited:.0f} s for it ({holders})")

    def holders(self) -> tuple[tuple, str]:
        """Who has the places this lease may get, and that in words: "b7 held by HOST/USER for 3 min"."""
        now = time.time()
        out, who = [], []
        for place in self.lab.matching(self.filt):
            if place.acquired:
                whom = place.acquired + (" (this user, outside this run)" if place.acquired == self.lab.user else "")
                out.append(f"{place.name} held by {whom} for {ago(now - place.changed)}")
            elif place.reservation and place.reservation != self.token:
                out.append(f"{place.name} reserved by another user")
            who.append((place.name, place.acquired, place.reservation))
        return tuple(who), ", ".join(out) or "queued behind earlier reservations"

    def acquire(self) -> None:
        _, _, pb = _api()
        lab_state.note_lease(self.lab, self)
        self.lab.call("AcquirePlace", pb.AcquirePlaceRequest(placename=self.place))
        self.lab.sync()
        self.acquired = True
        # the coordinator's own time of this acquisition: the next run after a kill -9 releases
        # the place only while it is still this one (not one the user made by hand since)
        place = self.lab.places.get(self.place)
        self.changed = getattr(place, "changed", None)
        lab_state.note_lease(self.lab, self)
        self.lab.say(f"place {self.place}: acquired by {self.lab.user}")

    def get_target(self):
        if self.target is None:
            self.target = self.lab.target(self.place)
        return self.target

    # -- power ------------------------------------------------------------------------------------
    def power(self):
        """The place's PowerProtocol driver: the environment config's, else one made for a power
        resource of the place (as `labgrid-client power` does); None when it has neither."""
        from labgrid.exceptions import NoDriverFoundError
        target = self.get_target()
        try:
            return target.get_driver("PowerProtocol")
        except NoDriverFoundError:
            pass
        for resource in target.resources:
            driver = POWER_DRIVERS.get(type(resource).__name__)
            if driver:
                from labgrid.factory import target_factory
                drv = target_factory.class_from_string(driver)(target, name=None)
                target.activate(drv)
                return drv
        return None

    def switch(self, action: str) -> bool:
        """Power ACTION ("on", "off", "cycle") through the place's driver; False when it has none."""
        drv = self.power()
        if drv is None:
            return False
        try:
            getattr(drv, action)()
        except Exception as e:      # the driver's own error: a switch that refused, a command that failed
            raise LabError(f"place {self.place}: power {action} failed ({type(drv).__name__}): {one_line(e)}") from None
        return True

    def power_on(self) -> None:
        if self.switch("on"):
            self.lab.say(f"place {self.place}: powered on")
        else:
            self.notes.append(f"place {self.place}: no power driver in the lab or {ENV_VAR}: taken as powered")

    # -- the place's shell ----------------------------------------------------------------------
    def network(self):
        """The place's NetworkService (address, username, port)."""
        from labgrid.resource import NetworkService
        target = self.get_target()
        try:
            return target.get_resource(NetworkService, wait_avail=False)
        except Exception:
            raise LabError(f"place {self.place}: it has no NetworkService (flagbench reaches a place's "
                           "shell over ssh)") from None

    @property
    def dest(self) -> str:
        """The NetworkService as an ssh destination: root@10.0.0.5, ssh://root@10.0.0.5:2222."""
        net = self.network()
        where = f"{net.username}@{net.address}" if net.username else net.address
        return where if net.port == 22 else f"ssh://{where}:{net.port}"

    @property
    def ssh(self) -> list[str]:
        """flagbench's ssh client for this place: through the exporter when labgrid says so."""
        net = self.network()
        extra = getattr(net, "extra", None) or {}
        words = ssh_command()
        if extra.get("proxy_required") and extra.get("proxy"):
            words += ["-o", f"ProxyJump={extra['proxy']}"]
        return words

    # -- giving it back ---------------------------------------------------------------------------
    def release(self) -> None:
        _, _, pb = _api()
        if self in self.lab.leases:
            self.lab.leases.remove(self)
        try:
            if self.target is not None:
                try:
                    self.target.cleanup()        # drivers deactivated: a QEMUDriver's qemu ends
                except Exception as e:
                    self.lab.say(f"place {self.place}: labgrid's cleanup: {e}")
            if self.acquired:
                self.lab.call("ReleasePlace", pb.ReleasePlaceRequest(placename=self.place))
                self.acquired = False
                self.lab.say(f"place {self.place}: released")
            self.lab.call("CancelReservation", pb.CancelReservationRequest(token=self.token))
        except LabError as e:
            if "does not exist" not in str(e):
                raise LabError(f"place {self.place or self.spec}: not released: {e}") from None
        lab_state.forget_lease(self)


# power resources a place may export -> the driver labgrid-client's `power` makes for them
POWER_DRIVERS = {"NetworkPowerPort": "NetworkPowerDriver", "NetworkUSBPowerPort": "USBPowerDriver",
                 "NetworkSiSPMPowerPort": "SiSPMPowerDriver", "PDUDaemonPort": "PDUDaemonDriver",
                 "TasmotaPowerPort": "TasmotaPowerDriver", "NetworkYKUSHPowerPort": "YKUSHPowerDriver"}
