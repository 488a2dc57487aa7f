"""hive's command line: a thin click group over the package (no crawl logic here)."""

from __future__ import annotations

from pathlib import Path

import click

from hive import __version__
from hive import config as config_mod
from hive.errors import ConfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hive")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A TOML file whose keys override conf/default.toml.")
@click.option("-s", "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override one config key (repeatable), e.g. -s fetch.threads=8.")
@click.pass_context
def main(ctx: click.Context, config_file: Path | None, overrides: tuple[str, ...]) -> None:
    """hive: a polite, prioritizing, persistent web crawler."""
    try:
        ctx.obj = config_mod.load(config_file, overrides)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/--set") from exc


if __name__ == "__main__":
    main()
