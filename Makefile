# `make demo` and `make test` bootstrap .venv on first use (tools/bootstrap.sh), then run.
VENV := .venv
STAMP := $(VENV)/.zoo-installed

.PHONY: demo test test-slow lint tox clean

demo: $(STAMP)
	$(VENV)/bin/zoo demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

test-slow: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check zoo tests benchmarks tools
	$(VENV)/bin/ruff format --check zoo tests benchmarks tools

tox: $(STAMP)
	$(VENV)/bin/tox -e py311-lightning24,py311-lightning26,lint,cff

$(STAMP): pyproject.toml constraints.txt debian-packages.txt tools/bootstrap.sh
	tools/bootstrap.sh $(VENV)
	touch $@

clean:
	rm -rf $(VENV) .tox build dist *.egg-info
