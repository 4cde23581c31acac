"""The FastAPI app: `uvicorn codebreaker_env.server.app:app`, or `server --port N` once installed."""

from __future__ import annotations

import argparse

from openenv.core.env_server.http_server import create_app

from ..models import CodebreakerObservation, CodebreakerState, GuessAction
from .codebreaker_environment import CodebreakerEnvironment

app = create_app(CodebreakerEnvironment, GuessAction, CodebreakerObservation, env_name="codebreaker",
                 max_concurrent_envs=64, state_cls=CodebreakerState)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="serve the Codebreaker OpenEnv environment")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
