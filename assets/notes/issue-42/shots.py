"""Take the four issue-42 screenshots (workshop plain words, across-rounds table, benchmark chart, live-context
comparison) from the app checkout argv[1] into folder argv[2], named i42-*-argv[3].png (before: run on a copy of
the unchanged commit; after: on this checkout). HF_HUB_OFFLINE=1 python assets/notes/issue-42/shots.py . out after"""
import os, subprocess, sys, time, urllib.request
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "app"))
import browser_kit as kit
from playwright.sync_api import sync_playwright

repo, out, suffix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
out.mkdir(parents=True, exist_ok=True)
port = kit.free_port()
log = open(out / f"server-{suffix}.log", "w")
env = dict(os.environ, HF_HUB_OFFLINE="1", TEV_APP_PROPOSER="default", TEV_APP_THREADS="1", PYTHONPATH=str(repo))
proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app/Home.py", "--server.headless", "true",
                         "--server.port", str(port), "--browser.gatherUsageStats", "false",
                         "--server.fileWatcherType", "none"], cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
url = f"http://127.0.0.1:{port}"
for _ in range(180):
    try:
        if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read().strip() == b"ok":
            break
    except OSError:
        time.sleep(0.5)
def scroll_to_plot(page, start):
    page.wait_for_function("""(start) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(
        e => e.layout && ((e.layout.title || {}).text || '').replace(/<[^>]*>/g, '').startsWith(start))""", arg=start, timeout=60_000)
    page.evaluate("""(start) => { const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
        e => e.layout && ((e.layout.title || {}).text || '').replace(/<[^>]*>/g, '').startsWith(start));
        gd.scrollIntoView({block: 'start'}); window.scrollBy(0, -250); }""", start)
    page.wait_for_timeout(1500)


try:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1600, "height": 1500})
        page.goto(url)
        page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
        # workshop plain words
        kit.open_page(page, "Exit law workshop")
        page.get_by_text("The law in plain words", exact=False).wait_for(timeout=60_000)
        kit.wait_for_plots(page, 6)
        page.get_by_text("The law in plain words", exact=False).scroll_into_view_if_needed()
        page.screenshot(path=str(out / f"i42-workshop-plain-words-{suffix}.png"))
        print("workshop", flush=True)
        # across rounds (toy sampled source)
        kit.open_page(page, "Verifier comparison")
        src = "sampled trees (toy target, fresh draws at one context)"
        page.get_by_text(src, exact=True).wait_for(timeout=60_000)
        page.get_by_text(src, exact=True).click()
        kit.wait_idle(page)
        kit.set_number(page, "rounds (fresh trees)", 60)
        page.get_by_role("button", name="▶ Verify every round").click()
        page.get_by_text("Across rounds: E[L] against E[1 + C]", exact=False).wait_for(timeout=240_000)
        page.locator('[data-testid="stDataFrame"]').last.wait_for(timeout=240_000)
        kit.wait_idle(page)
        page.get_by_text("Across rounds: E[L] against E[1 + C]", exact=False).scroll_into_view_if_needed()
        page.wait_for_timeout(1500)
        page.screenshot(path=str(out / f"i42-across-rounds-{suffix}.png"))
        print("across", flush=True)
        # benchmark chart
        box = page.get_by_label("or read every .json in a folder", exact=True)
        box.fill(str(repo / "assets/notes/issue-36/bench"))
        box.press("Enter")
        kit.wait_idle(page)
        scroll_to_plot(page, "speedup over")
        page.screenshot(path=str(out / f"i42-bench-chart-{suffix}.png"))
        print("bench", flush=True)
        # live context
        kit.open_page(page, "Tree explorer")
        page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=60_000)
        kit.set_number(page, "max new tokens", 8)
        page.get_by_role("button", name="▶ Run live").click()
        page.get_by_text("Across rounds").wait_for(timeout=240_000)
        kit.wait_idle(page)
        kit.open_page(page, "Verifier comparison")
        live = "sampled trees at an explorer round's context (its target and drafter)"
        page.get_by_text(live, exact=True).wait_for(timeout=60_000)
        page.get_by_text(live, exact=True).click()
        kit.wait_idle(page)
        kit.set_number(page, "rounds (fresh trees)", 20)
        page.get_by_role("button", name="▶ Draw the trees").click()
        page.get_by_text("independent draws of sampled:", exact=False).wait_for(timeout=180_000)
        kit.wait_idle(page)
        page.get_by_role("button", name="▶ Verify every round").click()
        page.locator('[data-testid="stDataFrame"]').last.wait_for(timeout=120_000)
        kit.wait_for_plots(page, 1)
        page.wait_for_timeout(1500)
        scroll_to_plot(page, "across rounds")
        page.screenshot(path=str(out / f"i42-live-context-{suffix}.png"))
        print("live", flush=True)
        browser.close()
finally:
    proc.terminate()
