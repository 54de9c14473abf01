"""``li db path`` and ``li db migrate``."""

from __future__ import annotations

from lirun.cli.common import add_db_option, make_parser, print_json
from lirun.paths import resolve_db_url
from lirun.settings import Settings
from lirun.store import is_postgres_url, open_store
from lirun.store.queries import latest_version
from lirun.store.urls import check_url, redact_url

EXIT_CODES = "  0  done\n  2  usage error, or the database cannot be opened or migrated"
PATH_EXIT_CODES = (
    "  0  printed (the database need not exist yet)\n  2  usage error, or a malformed database URL"
)
MIGRATE_EXIT_CODES = (
    "  0  the database exists and its schema is up to date (created if missing)\n"
    "  2  usage error, or the database cannot be opened, created or migrated"
)


def main(argv: list[str], settings: Settings) -> int:
    parser = make_parser("li db", "Database housekeeping.", EXIT_CODES)
    sub = parser.add_subparsers(dest="action", required=True, metavar="{path,migrate}")
    for name, helptext, exit_codes in (
        ("path", "print the database URL in use (password redacted)", PATH_EXIT_CODES),
        ("migrate", "create the database or bring its schema up to date", MIGRATE_EXIT_CODES),
    ):
        p = sub.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=f"exit codes:\n{exit_codes}",
            formatter_class=parser.formatter_class,
        )
        add_db_option(p)
        p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.action == "path":
        resolved = resolve_db_url(args.db)
        if is_postgres_url(resolved):
            check_url(resolved)
        url = redact_url(resolved)
        print_json({"url": url}, schema="lirun.db_path/1") if args.json else print(url)
        return 0
    store = open_store(args.db)
    try:
        result = {
            "url": store.display_url,
            "schema_version": latest_version(store.dialect),
        }
    finally:
        store.close()
    if args.json:
        print_json(result, schema="lirun.db_migrate/1")
    else:
        print(f"{result['url']}: schema version {result['schema_version']}")
    return 0
