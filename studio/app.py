"""The studio page: builds the Blocks from the tabs and serves it (``studio webui``).

Light: gradio, engine's light modules and studio/*. Never imports torch / transformers / peft / datasets: the demo
workspace is built by a subprocess (``python -m engine.cli demo``) and every heavy job runs in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# Read by the queue every Blocks makes for itself; a later ``Blocks.queue(default_concurrency_limit=...)`` would
# rebuild the whole FastAPI app once more only to change this number.
os.environ.setdefault("GRADIO_DEFAULT_CONCURRENCY_LIMIT", "8")

from studio import gradio_setup  # noqa: E402 - before gradio: skips its stub regeneration at import

gradio_setup.install()

import gradio as gr  # noqa: E402

from engine.core import accounts  # noqa: E402
from studio import backend, fan_in, page_speed, team  # noqa: E402
from studio import settings as settings_mod  # noqa: E402
from studio.i18n.page import LANGS, Texts, t  # noqa: E402

CSS_PATH = Path(__file__).resolve().parent / "studio.css"


@dataclass
class Ctx:
    """What the tabs share while the page is built."""

    texts: Texts
    lang: Any = None  # the language dropdown (an input of handlers that write text)
    lang_value: str = "en"
    run_picker: Any = None
    form: dict = field(default_factory=dict)
    start_btn: Any = None
    timer: Any = None
    tab: Any = None  # the tab being built (tabs refresh their pickers on select)
    on_load: list = field(default_factory=list)  # (fn, inputs, outputs) answered when the page (re)loads
    # (fn, inputs, outputs) answered when the language changes, all in one request (studio/fan_in.py); after_lang's
    # once those answers are drawn
    on_lang: list = field(default_factory=list)
    after_lang: list = field(default_factory=list)
    # widgets whose gradio words ("Drop File Here", "Click to Upload") are set when they are drawn: drawn again after a
    # language switch, once gradio's words in the new language are loaded
    redraw: list = field(default_factory=list)
    tabs: Any = None  # the page's tabs (a handler may switch to one: the Evaluate tab opens a row in Chat)
    shared: dict = field(default_factory=dict)  # components a tab offers later tabs (chat -> eval)

    @staticmethod
    def run_choices(lang: str = "en") -> list[tuple[str, str]]:
        from studio.tabs import dashboard  # the picker's labels and the dashboard's header say one status

        return dashboard.run_choices(lang)

    @staticmethod
    def default_run() -> str | None:
        """What a (re)opened page shows: a running training run, else the newest one (a merge started after training
        must not take the dashboard from the run it merged)."""
        listed = backend.training_runs()
        running = [r for r in listed if getattr(r, "status", "") == "running"]
        chosen = (running or listed or [None])[0]
        return str(chosen.id) if chosen is not None else None

    def refresh_run_picker(self, current: str | None = None, lang: str = "en"):
        """Fresh choices (runs started elsewhere appear); keep the user's pick (a typed run id too), else the
        default run."""
        return gr.update(choices=self.run_choices(lang), value=current or self.default_run())


def build_app(lang: str = "en") -> gr.Blocks:
    """The whole page. Tabs are laid out by studio.tabs.*; their handlers are plain functions."""
    from studio.tabs import chat, dashboard, data, doctor, export, models, runs, train
    from studio.tabs import eval as eval_tab

    # after Train, in this order: (the tab's title in the catalog, its module)
    TABS = [
        ("tab_runs", runs),
        ("tab_data", data),
        ("tab_export", export),
        ("tab_chat", chat),
        ("tab_models", models),
        ("tab_doctor", doctor),
        ("tab_eval", eval_tab),
    ]
    ctx = Ctx(texts=Texts(), lang_value=lang)
    team_mode = accounts.team_mode()
    with team.building(), gr.Blocks(title=t("title", lang), analytics_enabled=False) as app:
        with gr.Row(elem_id="topbar"):
            title = gr.Markdown(f"## {t('title', lang)}", elem_id="title")
            ctx.lang = gr.Dropdown(
                [(v, k) for k, v in LANGS.items()],
                value=lang,
                label=t("lang", lang),
                elem_id="lang-picker",
                scale=0,
                min_width=140,
            )
            ctx.texts.add(ctx.lang, "lang")
            if team_mode:  # gradio's /logout ends every session of the user and shows the login page
                logout = gr.Button(t("logout", lang), link="/logout", size="sm", scale=0, elem_id="logout")
                ctx.texts.add(logout, "logout")
        with gr.Tabs(elem_id="tabs") as ctx.tabs:
            with gr.Tab(t("tab_train", lang), id="train", elem_id="tab-train") as tab_train:
                ctx.texts.add(tab_train, "tab_train")
                # The run picker is an output of Start (in the form) but is laid out in the dashboard below.
                ctx.run_picker = gr.Dropdown(
                    choices=ctx.run_choices(lang),
                    value=None,
                    label=t("run", lang),
                    allow_custom_value=True,
                    scale=3,
                    elem_id="run-picker",
                    render=False,
                )
                ctx.texts.add(ctx.run_picker, "run")
                train.build(ctx)
                dashboard.build(ctx)
            for key, module in TABS:
                with gr.Tab(t(key, lang), id=key[4:], elem_id=f"tab-{key[4:]}") as tab:
                    ctx.texts.add(tab, key)
                    ctx.tab = tab
                    module.build(ctx)
        comps = ctx.texts.components()
        # The language the user chose is kept in the browser (localStorage; not a secret, so a fixed key: it
        # survives a restart of the studio too) and set first on load; the switch relabels the page as usual.
        saved_lang = gr.BrowserState(lang, storage_key="studio-lang", secret="studio-lang")
        # Every tab's words, tables, charts and choices in the new language, in one answer (fan_in: gradio runs
        # one event's listeners one after another, a round trip and a redraw each)
        relabel = (lambda code: [f"## {t('title', code)}", *ctx.texts.updates(code), code], [ctx.lang])
        choices = (lambda lang_: gr.update(choices=ctx.run_choices(lang_)), [ctx.lang], [ctx.run_picker])
        fn, inputs, outputs = fan_in.combine([(*relabel, [title, *comps, saved_lang]), *ctx.on_lang, choices])
        quiet = {"queue": False, "show_progress": "hidden"}
        switched = ctx.lang.change(fn, inputs, outputs, **quiet, trigger_mode="always_last")
        if ctx.after_lang:
            switched = switched.then(*fan_in.combine(ctx.after_lang), **quiet)
        switched.then(None, None, None, js=RELABELLED_JS, queue=False)
        # Gradio's own words (upload areas' "Drop File Here", "Click to Upload", ...) follow the page's language too:
        # the widgets drawn already take them when drawn again (hidden, then shown).
        n = len(ctx.redraw)
        relocaled = ctx.lang.change(
            lambda _code: [gr.update(visible=False)] * n, [ctx.lang], ctx.redraw, js=GRADIO_LOCALE_JS, **quiet
        )
        relocaled.then(lambda: [gr.update(visible=True)] * n, None, ctx.redraw, **quiet).then(
            None, [ctx.lang], None, js=REDRAWN_JS, queue=False
        )

        def _load_language(code):
            """The saved language, with the page's words relabelled in the same answer (the switch's handler would
            come after the load's own and a redraw more), the page hidden meanwhile."""
            if code not in LANGS or code == lang:
                return [gr.skip()] * (1 + len(comps))
            ups = ctx.texts.updates(code)
            ups[comps.index(ctx.lang)] = gr.update(value=code, label=t("lang", code))
            return [f"## {t('title', code)}", *ups]

        loaded = app.load(_load_language, [saved_lang], [title, *comps], queue=False)
        loaded.then(None, [ctx.lang], None, js=GRADIO_LOCALE_JS, queue=False).then(
            None, None, None, js=RELABELLED_JS, queue=False
        )
        # Every list (models, datasets, presets, runs, chat models, merges) is read again on load, in one answer:
        # the page was built when the studio started. These run after the language is set, so they answer in it.
        # A reload or a second tab re-attaches to the run that is going on (or the newest), and opening the picker
        # lists runs started meanwhile by the CLI or another tab.
        attach = (lambda lang_: ctx.refresh_run_picker(None, lang_), [ctx.lang], [ctx.run_picker])
        loaded.then(*fan_in.combine([*ctx.on_load, attach]), **quiet)
        # Choices only: setting the value here would race with what the user is typing.
        ctx.run_picker.focus(*choices, queue=False)
    app.studio_texts = ctx.texts  # what a language switch relabels (tests check each attribute exists)
    return app


# Sets the locale of gradio's own front-end strings (its svelte-i18n store) to the page's language: gradio takes the
# browser's language for them, so a Chinese page in an English browser read "Drop File Here". The store is changed
# through ``changeLocale``, which gradio's front-end core module exports; the module's file is found among the
# page's loaded assets (its name carries a build hash). When a gradio version lacks it, nothing happens.
# A widget takes gradio's words when it is drawn: what the page draws after a switch (a tab or section opened
# later) is in the new language at once; what was already drawn is drawn again (``AppContext.redraw``) once the
# language's words, a file gradio fetches on its first use, have arrived (this waits for it, 5 s at most); and from
# the next load on ``GRADIO_LOCALE_HEAD`` hands gradio the page's language before it starts.
GRADIO_LOCALE_JS = """async (code) => {
  const locale = code === 'zh' ? 'zh-CN' : 'en';
  try { localStorage.setItem('studio-gradio-locale', locale); } catch (e) {}
  const loaded = (re) => performance.getEntriesByType('resource').map(e => e.name).find(u => re.test(u));
  const named = /\\/assets\\/core-[^/]*\\.js(\\?|$)/;
  const url = [...document.querySelectorAll('link[href], script[src]')].map(e => e.href || e.src)
    .find(u => named.test(u)) || loaded(named);
  try { const m = url && await import(url); if (m && m.changeLocale) m.changeLocale(locale); } catch (e) {}
  const words = { test: (u) => u.includes('/assets/' + locale + '-') && /\\.js(\\?|$)/.test(u) };
  for (let i = 0; locale !== 'en' && i < 100 && !loaded(words); i++) await new Promise(r => setTimeout(r, 50));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return [code];
}"""
# Runs before gradio's scripts: gradio reads the browser's language (navigator.language) when it starts. The page is
# built in English; when the chosen language is another, the page stays hidden (a line says it is switching) until
# the switch has relabelled it (``RELABELLED_JS``), so no English shows for the seconds that takes after a load; 20 s
# at most, whatever happens.
GRADIO_LOCALE_HEAD = """<style>
html.studio-relabel gradio-app, html.studio-relabel .gradio-container { visibility: hidden; }
html.studio-relabel body::before {
  content: "正在切换语言…"; position: fixed; top: 40%; left: 0; right: 0; text-align: center; color: #666;
}
</style>
<script>
(() => {
  try {
    const locale = localStorage.getItem('studio-gradio-locale');
    if (locale) {
      Object.defineProperty(Navigator.prototype, 'language', { get: () => locale, configurable: true });
      Object.defineProperty(Navigator.prototype, 'languages', { get: () => [locale], configurable: true });
    }
    if (locale && !locale.startsWith('en')) {
      document.documentElement.classList.add('studio-relabel');
      setTimeout(() => document.documentElement.classList.remove('studio-relabel'), 20000);
    }
  } catch (e) {}
})();
</script>"""
# Once the upload areas are drawn again: the page's root says in which language (a test waits for it before using
# them, since an area drawn again in the middle of an upload would lose it).
REDRAWN_JS = "(code) => { document.documentElement.dataset.studioWords = code; return []; }"
RELABELLED_JS = "() => { document.documentElement.classList.remove('studio-relabel'); return []; }"


def ensure_demo(timeout: float = 300.0) -> str:
    """Build the demo workspace in a subprocess when it is missing (the UI process must not import torch)."""
    from engine.core import workspace

    ready = [
        workspace.demo_model_dir() / "config.json",
        workspace.data_dir() / "dataset_info.json",
        workspace.home() / "demo_spec.yaml",
    ]
    if all(p.is_file() for p in ready):
        return "demo workspace ready"
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli", "demo", "--no-real-model"],  # the real model: `studio demo`
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"demo build timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        return f"demo build failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}"
    if not all(p.is_file() for p in ready):
        return f"demo build left no {', '.join(str(p) for p in ready if not p.is_file())}"
    return "demo workspace built"


def start_background() -> None:
    """Before the page is served: the run registry is checked (a damaged or missing one is kept aside and rebuilt
    from the run folders; the notice is printed here and shown in the Runs tab), and the watchdog thread starts:
    it reaps runs whose wrapper died, finishes overdue stops and moves the queue every few seconds whether or not a
    browser is open (a page timer only ticks while one is)."""
    from engine.runs import heal, watchdog

    try:
        notice = heal.ensure_registry()
    except Exception as exc:  # noqa: BLE001 - the page still serves; the Runs tab says what the registry says
        print(f"studio: the run registry could not be checked: {exc}", flush=True)
    else:
        if notice:
            print(f"studio: {notice}", flush=True)
    watchdog.start()


def launch_kwargs(conf: settings_mod.Settings) -> dict:
    """``Blocks.launch`` arguments. With a login, ``studio.guard.LoginGuard`` wraps gradio's app: the login page
    carries no API description (paths, run ids, dataset names), every other route but its assets answers 401 without
    the login, wrong logins are throttled per address (``STUDIO_TRUSTED_PROXIES``, see ``settings``) and per account,
    and a login lasts ``STUDIO_SESSION_HOURS``."""
    from starlette.middleware import Middleware

    from studio.guard import SESSION_END_HEAD, LoginGuard
    from studio.member_api import MemberAPI
    from studio.proxy import TrustedProxy

    # uvicorn (started by gradio, which passes no proxy settings) reads this when it starts: it believes nobody's
    # X-Forwarded-For, and studio.proxy believes the proxies the operator named (and their user header).
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    return {
        "server_name": conf.host,
        "server_port": conf.port,
        "auth": team.login if conf.team else conf.auth,
        "run_history": False,
        "css_paths": [CSS_PATH],
        "head": GRADIO_LOCALE_HEAD + page_speed.head() + (SESSION_END_HEAD if conf.team or conf.auth else ""),
        "theme": gr.themes.Soft(),
        "show_error": True,
        "footer_links": [],
        "max_file_size": conf.max_upload_bytes,
        "allowed_paths": [],
        "quiet": True,
        "ssr_mode": False,  # a Node server would render pages outside the guard
        # FastAPI's own /openapi.json lists every route to anyone; gradio's /gradio_api/openapi.json needs the login.
        # The login comes first; then gradio's status trackers as studio.page_speed quiets them (a public asset).
        "app_kwargs": {
            "middleware": [
                # the client's address and the account a trusted proxy logged in, read before anything else
                Middleware(TrustedProxy, proxies=conf.trusted_proxies, user_header=conf.proxy_user_header),
                Middleware(MemberAPI),  # /api/v1/: a member's own command line, with a personal token (team mode)
                Middleware(LoginGuard, session_s=conf.session_s),
                Middleware(page_speed.QuietStatusTrackers),
            ],
            "openapi_url": None,
        },
    }


def port_in_use(host: str, port: int) -> str | None:
    """Why the page cannot listen on host:port (another studio, or another server, holds it), in one line naming the
    way out; None when it can. Checked before anything is built: gradio's own refusal is a 26-line traceback whose
    hint (GRADIO_SERVER_PORT) Studio does not read."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None  # a host that does not resolve: gradio says so itself
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a TIME_WAIT port is free
        try:
            probe.bind(address)
        except OSError as exc:
            return f"port {port} on {host} is in use ({exc.strerror}): choose another with --port N or STUDIO_PORT=N"
    return None


def cli(argv: list[str] | None = None) -> int:
    """``studio webui [--host H] [--port P] [--auth USER:PASS] [--home DIR] [--no-demo]``."""
    try:
        conf = settings_mod.load(argv)
    except settings_mod.SettingsError as exc:
        print(f"studio webui: {exc}", file=sys.stderr)
        return 2
    if conf.home:
        os.environ["STUDIO_HOME"] = conf.home
    busy = port_in_use(conf.host, conf.port)
    if busy:
        print(f"studio webui: {busy}", file=sys.stderr)
        return 2
    if conf.build_demo:
        print(ensure_demo(), flush=True)
    start_background()
    team.install()  # team mode: the engine lists and reads runs as the logged-in user may see them
    app = build_app()
    print(
        f"studio: serving on http://{conf.host}:{conf.port}"
        + (" (team mode: accounts' logins)" if conf.team else " (login required)" if conf.auth else ""),
        flush=True,
    )
    app.launch(**launch_kwargs(conf))  # queued, up to GRADIO_DEFAULT_CONCURRENCY_LIMIT events of a kind at once
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
