"""What a run holds in a labgrid lab, written down so a run killed with -9 is undone by the next.

<cache>/labgrid/TOKEN.json, one per lease (hosts/labgrid.py), written when the reservation is
made and again before the place is acquired, removed once it is released: the coordinator, the
place, the reservation token, the labgrid user ("host/user") and the flagbench process that
held it (procs' owner token: a pid and its start time, so a reused pid is not mistaken for it).

`sweep(lab)` (at the start of every run that uses a lab) looks at the notes of that
coordinator whose process is gone: a place still acquired by the labgrid user that run was
is released, the reservation cancelled, and the run says so; a place someone else has taken
since is left alone. A note whose coordinator does not answer stays for a later run.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flagbench import procs
from flagbench.cache import cache_dir


def state_dir() -> Path:
    return cache_dir() / "labgrid"


def _path(token: str) -> Path:
    return state_dir() / f"{token}.json"


def note_lease(lab, lease) -> None:
    state_dir().mkdir(parents=True, exist_ok=True)
    data = {"coordinator": lab.address, "user": lab.user, "spec": lease.spec, "token": lease.token,
            "place": lease.place, "owner": procs._token(), "pid": os.getpid(), "since": time.time()}
    path = _path(lease.token)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def forget_lease(lease) -> None:
    _path(lease.token).unlink(missing_ok=True)


def left_behind(address: str) -> list[dict]:
    """The notes of COORDINATOR whose flagbench is no longer running."""
    out = []
    for path in sorted(state_dir().glob("*.json")) if state_dir().is_dir() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if data.get("coordinator") == address and not procs._owner_alive(data.get("owner", "")):
            out.append(data)
    return out


def sweep(lab) -> list[str]:
    """Release what dead runs left held in LAB; what was done, one line each (also said)."""
    from flagbench.hosts.labgrid import LabError, _ago, _api
    _, _, pb = _api()
    done = []
    for note in left_behind(lab.address):
        place = lab.places.get(note.get("place") or "")
        when = _ago(time.time() - note.get("since", time.time()))
        try:
            if place is not None and place.acquired == note["user"]:
                lab.call("ReleasePlace", pb.ReleasePlaceRequest(placename=place.name))
                done.append(f"place {place.name}: released; it was held as {note['user']} by a flagbench run "
                            f"(pid {note.get('pid')}, since {when} ago) that was killed")
            try:
                lab.call("CancelReservation", pb.CancelReservationRequest(token=note["token"]))
            except LabError:
                pass         # expired already (a reservation not acquired lives 60 s unpolled)
        except LabError as e:
            done.append(f"place {note.get('place') or note.get('spec')}: left by a killed run, not released: {e}")
            continue
        _path(note["token"]).unlink(missing_ok=True)
    for line in done:
        lab.say(line)
    return done
