"""The ExitTrain page's "Compare A and B (paired)" with its default settings, outside the browser: A = the committed
drafter, B = a drafter trained with the page's default recipe. The same calls the page makes
(`shared_ui.get_target` / `get_proposer`, `tevcore.train.eval.paired_coverage`, `drafter_compare.paired_table`).

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python assets/notes/issue-42/paired_page_default.py B_FOLDER [PER_SET] [OUT.json]
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "app"))

import drafter_compare  # noqa: E402
import shared_ui  # noqa: E402
import trainruns  # noqa: E402
from tevcore.config import SAMPLING_TEMPERATURE  # noqa: E402
from tevcore.results import ResultRecord, RunMeta, write_result  # noqa: E402
from tevcore.train import eval as engine_eval  # noqa: E402

other = sys.argv[1]
per_set = int(sys.argv[2]) if len(sys.argv) > 2 else 2  # the page's default
budgets, temperature, tokens, resolution, lookup = [8, 16], SAMPLING_TEMPERATURE, 32, 1.0, True  # the page's defaults
base = str(trainruns.DEFAULT_DRAFTER)
sets = engine_eval.prompt_sets(float(temperature))
suffix = drafter_compare.VARIANTS["+ lookup"] if lookup else ""
target = shared_ui.get_target(shared_ui.target_spec())
proposers = [shared_ui.get_proposer(p + suffix, shared_ui.target_spec()) for p in (base, other)]
cells = engine_eval.paired_coverage(target, *proposers, engine_eval.eval_prompts(sets, per_set), float(temperature),
                                    budgets, tokens, 0, progress=False)
table = drafter_compare.paired_table(cells, resolution / 100, len(sets))
print(" ".join(drafter_compare.paired_command(base, other, budgets, per_set, float(temperature), tokens, lookup)))
print(table.to_string(index=False))
if len(sys.argv) > 3:
    settings = {"A": base, "B": other, "per_set": per_set, "budgets": budgets, "temperature": float(temperature),
                "max_new_tokens": tokens, "lookup": lookup}
    run_config = Path(other).parent / "config.json"  # B is a checkpoint of a run: record how it was trained
    if run_config.is_file():
        settings["training"] = json.loads(run_config.read_text())
        manifest = Path(settings["training"]["data"]) / "manifest.json"  # and how its data set was built
        if manifest.is_file():
            settings["training_data"] = json.loads(manifest.read_text())["config"]
    meta = RunMeta.now(" ".join(["python", *sys.argv]), str(target.device), 0)
    write_result(sys.argv[3], ResultRecord("eval-drafter", meta, table.to_dict(orient="records"), settings=settings),
                 force=False)
