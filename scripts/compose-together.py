"""Checks that every service of a compose file can start together (scripts/check-compose).

The Compose Specification's schema accepts a file whose services cannot all run at once:
two services publishing one host port (`docker compose up -d` of everything then fails),
a `depends_on` naming no service, a cycle of dependencies, two services with one
`container_name`, a repeated key (YAML keeps the last silently). This finds those, a
service without a health check (the README starts services with `up -d --wait`), and a
port published beyond 127.0.0.1 (a throwaway database with a known password open to the
network).
Usage: python compose-together.py FILE; exit 1 with one line per problem.
"""

import sys

from ruamel.yaml import YAML


LOOPBACK = {"127.0.0.1", "::1", "[::1]"}


def published(service):
    """The (host IP, host port, protocol) triples a service publishes; the host port is ""
    when Docker picks a free one, the host IP "" when it binds every interface."""
    out = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            host = entry.get("published")
            out.append((entry.get("host_ip", ""), "" if host is None else str(host), entry.get("protocol", "tcp")))
            continue
        text = str(entry)
        text, _, protocol = text.partition("/")
        parts = text.rsplit(":", 2)
        host = parts[-2] if len(parts) >= 2 else ""
        ip = parts[0] if len(parts) == 3 else ""
        out.append((ip, host, protocol or "tcp"))
    return out


def host_ports(service):
    """The bindings of a service with a fixed host port (those two services can clash on)."""
    return [b for b in published(service) if b[1]]


def overlaps(a, b):
    """Whether two host port bindings collide (ranges such as 8000-8010 included)."""
    if a[2] != b[2] or (a[0] and b[0] and a[0] != b[0]):
        return False

    def span(p):
        lo, _, hi = p.partition("-")
        return int(lo), int(hi or lo)

    (alo, ahi), (blo, bhi) = span(a[1]), span(b[1])
    return alo <= bhi and blo <= ahi


def problems(doc):
    services = doc.get("services") or {}
    found = []
    bindings = []
    # One-shot jobs (another service waits for them to complete successfully) exit by
    # design: they have nothing to be healthy about.
    one_shot = {
        dep
        for service in services.values()
        if isinstance(service.get("depends_on"), dict)
        for dep, how in service["depends_on"].items()
        if isinstance(how, dict) and how.get("condition") == "service_completed_successfully"
    }
    names = {}
    for name, service in services.items():
        service = service or {}
        for binding in host_ports(service):
            for other, seen in bindings:
                if overlaps(binding, seen):
                    found.append(f"services {other} and {name} both publish host port {binding[1]}/{binding[2]}")
            bindings.append((name, binding))
        for ip, host, protocol in published(service):
            if ip not in LOOPBACK:
                where = f"host port {host}/{protocol}" if host else f"a free host port ({protocol})"
                found.append(
                    f"service {name} publishes {where} on {ip or 'every interface'}: publish on 127.0.0.1 only "
                    f'("127.0.0.1:HOST:CONTAINER"), so a developer\'s database is not open to the network'
                )
        cname = service.get("container_name")
        if cname:
            if cname in names:
                found.append(f"services {names[cname]} and {name} both have container_name {cname}")
            names[cname] = name
        deps = service.get("depends_on") or []
        for dep in deps:
            if dep not in services:
                found.append(f"service {name} depends on {dep}, which the file does not define")
        probe = service.get("healthcheck", {}).get("test") or []
        probe = " ".join(probe) if isinstance(probe, list) else str(probe)
        clients = ["curl ", "wget ", "busybox wget "]
        if "build" not in service and any(c in probe for c in clients[:2]):
            missing = [c.strip() for c in clients if c not in probe]
            if missing:
                found.append(
                    f"service {name}'s health check probes HTTP without {', '.join(missing)}: an image "
                    "may lack any one client (try curl, wget and busybox wget)"
                )
        if "healthcheck" not in service and name not in one_shot:
            found.append(f"service {name} has no healthcheck (`docker compose up --wait` needs one)")
    # Dependency cycles.
    state = {}

    def visit(name, path):
        if state.get(name) == "done" or name not in services:
            return
        if state.get(name) == "open":
            found.append("a depends_on cycle: " + " -> ".join(path + [name]))
            return
        state[name] = "open"
        for dep in (services[name] or {}).get("depends_on") or []:
            visit(dep, path + [name])
        state[name] = "done"

    for name in services:
        visit(name, [])
    return found


def main(path):
    try:
        doc = YAML(typ="safe").load(open(path, encoding="utf-8"))
    except Exception as e:  # a repeated key or a YAML error, with its line
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    found = problems(doc)
    for p in found:
        print(f"{path}: {p}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
