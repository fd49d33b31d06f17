#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run a test command with memd's local stand-ins around it.

  with_standins.py [--qdrant] [--openai] [--webhook] -- COMMAND [ARG...]

Starts each requested stand-in on a free loopback port with a fresh random
API key, then runs COMMAND with:
  MEMD_QDRANT_STANDIN_URL  http://127.0.0.1:<port>     (--qdrant)
  QDRANT_API_KEY           the Qdrant stand-in's key
  MEMD_OPENAI_STANDIN_URL  http://127.0.0.1:<port>/v1  (--openai)
  OPENAI_API_KEY           the embeddings stand-in's key
  MEMD_WEBHOOK_STANDIN_URL http://127.0.0.1:<port>/hook (--webhook)
  MEMD_WEBHOOK_SECRET      the webhook receiver's signing secret
and "@QDRANT_URL@" / "@OPENAI_URL@" replaced by those URLs in every other
environment variable (e.g. a vector suite's MEMD_VECTOR_CONFIG).

With --qdrant, after COMMAND ends the Qdrant stand-in's record is checked:
every request must have been valid against Qdrant's OpenAPI contract
(no errors, no undeclared properties) and every answer the stand-in gave
valid too; otherwise this exits 1 and prints the offending requests.
The contract file is $MEMD_SOURCE_ROOT/../shared/reference/
qdrant-openapi.json when present (CI), else the copy beside this script.

Exits with COMMAND's status (1 if the contract check failed, 2 if a
stand-in did not start). Stand-ins are always stopped.
"""

import json
import os
import secrets
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 5


def contract_path():
    root = os.environ.get("MEMD_SOURCE_ROOT")
    if root:
        shared = os.path.join(root, "..", "shared", "reference", "qdrant-openapi.json")
        if os.path.isfile(shared):
            return shared
    return os.path.join(HERE, "qdrant-openapi.json")


def start(script, args):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, script)] + args,
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()  # "PORT <n>"; empty if it died
    if not line.startswith("PORT "):
        p.kill()
        p.wait()
        raise RuntimeError("%s did not start" % script)
    return p, int(line.split()[1])


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    opts, cmd = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    env = dict(os.environ)
    procs, subst, qdrant_url = [], {}, None
    try:
        if "--qdrant" in opts:
            key = secrets.token_hex(16)
            p, port = start("qdrant_standin.py", ["--api-key", key, "--spec", contract_path()])
            procs.append(p)
            qdrant_url = "http://127.0.0.1:%d" % port
            env["MEMD_QDRANT_STANDIN_URL"] = qdrant_url
            env["QDRANT_API_KEY"] = key
            subst["@QDRANT_URL@"] = qdrant_url
        if "--openai" in opts:
            key = secrets.token_hex(16)
            p, port = start("openai_embeddings_standin.py", ["--api-key", key])
            procs.append(p)
            env["MEMD_OPENAI_STANDIN_URL"] = "http://127.0.0.1:%d/v1" % port
            env["OPENAI_API_KEY"] = key
            subst["@OPENAI_URL@"] = env["MEMD_OPENAI_STANDIN_URL"]
        if "--webhook" in opts:
            secret = secrets.token_hex(16)
            p, port = start("webhook_standin.py", ["--secret", secret])
            procs.append(p)
            env["MEMD_WEBHOOK_STANDIN_URL"] = "http://127.0.0.1:%d/hook" % port
            env["MEMD_WEBHOOK_SECRET"] = secret
        for k, v in list(env.items()):
            for mark, url in subst.items():
                v = v.replace(mark, url)
            env[k] = v

        rc = subprocess.call(cmd, env=env)

        if qdrant_url:
            with urllib.request.urlopen(qdrant_url + "/__standin/summary") as r:
                s = json.load(r)
            bad = s["invalid"] + s["with_warnings"] + s["bad_responses"]
            print("qdrant stand-in: %d requests, %d invalid, %d with undeclared "
                  "properties, %d answers off-contract" %
                  (s["requests"], s["invalid"], s["with_warnings"], s["bad_responses"]))
            if bad:
                print(json.dumps(s["problems"], indent=1), file=sys.stderr)
                rc = rc or 1
        return rc
    except RuntimeError as e:
        print("with_standins: %s" % e, file=sys.stderr)
        return 2
    finally:
        for p in procs:
            stop(p)


if __name__ == "__main__":
    sys.exit(main())
