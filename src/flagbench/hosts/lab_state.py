"""What a run holds in a labgrid lab, written down so a run killed with -9 is undone by the next.

<cache>/labgrid/TOKEN.json, one per lease (hosts/labgrid.py), written when the reservation is
made and again before the place is acquired, removed once it is released: the coordinator, the
place, the reservation token, the labgrid user ("host/user") and the flagbench process that
held it (procs' owner token: a pid and its start time, so a reused pid is not mistaken for it).

`sweep(lab)` (at the start of every run that uses a lab) looks at the notes of that
coordinator whose process is gone: a place still held by that run's acquisition is released,
the reservation cancelled, and the run says so. "Still that acquisition" is the coordinator's
word: the same user and the place's `changed` time noted when it was acquired (a place the user
released and acquired again by hand since, or someone else took, is left alone and said so).
A note whose coordinator does not answer stays for a later run.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flagbench import procs
from flagbench.cache import cache_dir
from flagbench.hosts.lab_api import LabError, ago, api


def state_dir() -> Path:
    return cache_dir() / "labgrid"


def _path(token: str) -> Path:
    return state_dir() / f"{token}.json"


def note_lease(lab, lease) -> None:
    state_dir().mkdir(parents=True, exist_ok=True)
    data = {"coordinator": lab.address, "user": lab.user, "spec": lease.spec, "token": lease.token,
            "place": lease.place, "changed": getattr(lease, "changed", None), "owner": procs._token(), "pid": os.getpid(), "since": time.time()}
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
        if not isinstance(data, dict) or not isinstance(data.get("token"), str):
            path.unlink(missing_ok=True)
            continue
        if data.get("coordinator") == address and not procs._owner_alive(data.get("owner", "")):
            out.append(data)
    return out


def still_theirs(note: dict, place) -> bool:
    """PLACE (the coordinator's record) is still held by the acquisition NOTE describes: same
    user, and acquired at the noted time (the coordinator's `changed`; a run killed between
    acquiring and noting it has none: then the reservation still on the place must be its own)."""
    if place is None or place.acquired != note.get("user"):
        return False
    if note.get("changed") is not None:
        return place.changed == note["changed"]
    return bool(place.reservation) and place.reservation == note.get("token")


def sweep(lab) -> list[str]:
    """Release what dead runs left held in LAB; what was done, one line each (also said)."""
    _, _, pb = api()
    done = []
    for note in left_behind(lab.address):
        place = lab.places.get(note.get("place") or "")
        when = ago(time.time() - note.get("since", time.time()))
        killed = f"a flagbench run (pid {note.get('pid')}, since {when} ago) that was killed"
        try:
            if still_theirs(note, place):
                lab.call("ReleasePlace", pb.ReleasePlaceRequest(placename=place.name))
                done.append(f"place {place.name}: released; it was held as {note['user']} by {killed}")
            elif place is not None and place.acquired:
                done.append(f"place {place.name}: left to {place.acquired}, who acquired it after {killed}")
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
