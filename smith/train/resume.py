"""A run's settings record (config.yaml, then config.resume-N.yaml per resume) and the resume check: a resume
whose settings differ from the run's is refused with the diff (smith.config.changes, the one settings diff
training and evaluation share), unless resume_allow_changes=true."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from smith.config import TrainConfig, as_plain, changes, field_of, flat
from smith.errors import ConfigError

CONFIG = "config.yaml"  # the configuration the run was started with; never overwritten
# settings a resume may change without resume_allow_changes=true: where the run lives and how it is started,
# how far it goes (max_steps), checkpoint cadence, reporting, where tools run and task items are cached, and
# the OpenAI client's key / timeouts; none changes what a step computes (a section name covers its keys)
RESUME_MAY_CHANGE = ("resume", "output_dir", "resume_allow_changes", "max_steps", "save_every", "logging",
                     "sandbox.workers", "sandbox.url", "tasks.cache_dir", "openai")


def _configs(run_dir: Path) -> list[Path]:
    """config.yaml, then config.resume-1.yaml, -2, ...: what the run was started and each time resumed with."""
    resumed = sorted((int(m.group(1)), p) for p in run_dir.glob("config.resume-*.yaml")
                     if (m := re.fullmatch(r"config\.resume-(\d+)\.yaml", p.name)))
    return [p for p in [run_dir / CONFIG, *(p for _, p in resumed)] if p.is_file()]


def config_changes(conf: TrainConfig, run_dir: Path) -> list[str]:
    """A resume's settings that differ from the ones the run last ran with, `key: old -> new` each (values as
    JSON; `(absent)` for a key one side lacks), RESUME_MAY_CHANGE left out. A run directory without a saved
    config (none was written yet) has none."""
    saved = _configs(run_dir)
    if not saved:
        return []
    try:
        old = OmegaConf.to_container(OmegaConf.load(saved[-1]), resolve=True)
    except (OSError, YAMLError, OmegaConfBaseException) as e:
        raise ConfigError(f"resume={run_dir}: {saved[-1]} is unreadable ({type(e).__name__}); restore it to "
                          "compare this resume's settings with the run's") from None
    new = as_plain(conf)
    known, now = flat(old), flat(new)

    def added_at_default(key: str) -> bool:
        """A setting the schema gained after the run was saved, at its default: the run ran with that value."""
        f = field_of(key)
        return key not in known and f is not None and f.default is not dataclasses.MISSING and now.get(key) == f.default

    return changes(old, new, RESUME_MAY_CHANGE, added_at_default)


def check_resume_config(conf: TrainConfig, run_dir: Path) -> list[str]:
    """Refuse a resume whose settings differ from the run's (a silently changed learning rate or category list
    would make one run of two), showing the diff above the error line, unless resume_allow_changes=true;
    returns the accepted changes (for the caller to print). Reads files only: runs before any model loads."""
    diff = config_changes(conf, run_dir)
    if diff and not conf.resume_allow_changes:
        raise ConfigError(f"resume={run_dir}: {len(diff)} setting(s) differ from the run's saved config "
                          "(listed above); drop those overrides, or pass resume_allow_changes=true to resume "
                          "with them", details=diff)
    return diff


def save_config(conf: TrainConfig, run_dir: Path, resumed_from: Path | None = None) -> Path:
    """The first start writes config.yaml; each resume adds config.resume-N.yaml (naming its checkpoint) and
    leaves the earlier ones as they are, so the run's history of settings stays readable."""
    path = run_dir / CONFIG
    note = ""
    if path.exists():
        path = run_dir / f"config.resume-{len(_configs(run_dir))}.yaml"
        note = f"# resumed from {resumed_from.name if resumed_from else 'step 0 (no checkpoint)'}\n"
    path.write_text(note + OmegaConf.to_yaml(as_plain(conf)))
    return path
