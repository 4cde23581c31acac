"""The Codebreaker server: environment, rubric and FastAPI app (runs in its own venv)."""
