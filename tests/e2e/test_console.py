"""The web console at /console, in headless Chromium (Debian's chromium and chromedriver, driven
by selenium): a tenant signs in with its API key using the keyboard only and sees its topics,
its group's lag and a record; a second tenant sees none of the first's; the operator sees
agents, metadata nodes, tenants and usage. Screenshots go to $FLOE_TEST_ARTIFACTS (default
/tmp/floe-e2e-artifacts/console)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from test_auth import PASSWORD, admin_tenants

ARTIFACTS = Path(os.environ.get("FLOE_TEST_ARTIFACTS", "/tmp/floe-e2e-artifacts")) / "console"
OPERATOR_TOKEN = "console-operator-token-0123456789"
TENANTS = {"acme": "acme-admin", "globex": "globex-admin"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def tenants(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    token_file = tmp_path / "operator-token"
    token_file.write_text(OPERATOR_TOKEN)
    floe = floe_factory.new("floe-console", object_store=f"file://{objects}", extra_args=[
        "--http-require-api-key", "--operator-token-file", str(token_file), "--auth-failures-per-minute", "0"])
    floe.keys = {}
    for tenant, user in TENANTS.items():
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
        floe.keys[tenant] = json.loads(admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", user))["token"]
    cluster_id = requests.get(f"{floe.http_url}/v3/clusters", headers=bearer(floe.keys["acme"]),
                              timeout=10).json()["data"][0]["cluster_id"]
    floe.v3 = f"{floe.http_url}/v3/clusters/{cluster_id}"
    return floe


def setup_data(floe, tenant, topic, group, records):
    key = bearer(floe.keys[tenant])
    r = requests.post(f"{floe.v3}/topics", json={"topic_name": topic, "partitions_count": 2}, headers=key, timeout=30)
    assert r.status_code == 201, r.text
    body = "\n".join(json.dumps({"partition_id": 0, "key": {"type": "STRING", "data": f"k{i}"},
                                 "value": {"type": "JSON", "data": {"order": i, "item": f"{tenant}-item-{i}"}}})
                     for i in range(records))
    r = requests.post(f"{floe.v3}/topics/{topic}/records:bulk", data=body, timeout=30,
                      headers={**key, "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    r = requests.post(f"{floe.v3}/consumer-groups/{group}/offsets", headers=key, timeout=10,
                      json={"offsets": [{"topic_name": topic, "partition_id": 0, "offset": 4}]})
    assert r.status_code == 200, r.text


@pytest.fixture
def browser():
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_bin:
        pytest.fail("chromium and chromedriver are not installed (scripts/test.sh installs them)")
    os.environ["SE_OFFLINE"] = "true"  # never let selenium look for a driver online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=options)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait_text(driver, text, timeout=20):
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        WebDriverWait(driver, timeout).until(lambda d: text in d.find_element("id", "main").text)
    except Exception:  # noqa: BLE001 - the page's text says why
        pytest.fail(f"{text!r} did not appear; the page shows:\n{driver.find_element('id', 'main').text}")


def shot(driver, name):
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def sign_in_by_keyboard(driver, url, token, operator=False):
    """Tab from the top of the page to the controls; no mouse."""
    from selenium.webdriver.common.keys import Keys
    driver.get(f"{url}/console")
    body = driver.find_element("tag name", "body")
    body.send_keys(Keys.TAB)
    assert driver.switch_to.active_element.get_attribute("class") == "skip", "the skip link comes first"
    active = driver.switch_to.active_element
    while active.get_attribute("name") != "role":
        active.send_keys(Keys.TAB)
        active = driver.switch_to.active_element
    if operator:
        active.send_keys(Keys.ARROW_DOWN)  # radio group: arrows move the choice (and the focus)
        active = driver.switch_to.active_element
        assert active.get_attribute("value") == "operator" and active.is_selected()
    active.send_keys(Keys.TAB)
    active = driver.switch_to.active_element
    assert active.get_attribute("id") == "token", f"the key field follows the role, not {active.get_attribute('outerHTML')}"
    active.send_keys(token, Keys.ENTER)


def check_accessibility_basics(driver):
    """Every form control has a label, charts have text alternatives, the page has a language."""
    missing = driver.execute_script("""
        const out = [];
        for (const el of document.querySelectorAll('input, select, textarea')) {
          if (el.type === 'hidden') continue;
          const named = el.labels && el.labels.length > 0 || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
          if (!named) out.push(el.outerHTML);
        }
        for (const svg of document.querySelectorAll('svg')) {
          if (svg.getAttribute('role') !== 'img' || !svg.getAttribute('aria-label')) out.push('svg without text');
        }
        if (!document.documentElement.lang) out.push('no lang');
        return out;""")
    assert missing == [], missing


@pytest.mark.timeout(240)
def test_console_shows_a_tenant_its_own_data_and_the_operator_the_cluster(tenants, browser):
    floe = tenants
    setup_data(floe, "acme", "orders", "billing", 10)
    setup_data(floe, "globex", "globex-secret", "globex-readers", 3)
    driver = browser

    # The page and its assets need no key, and carry a strict policy.
    page = requests.get(f"{floe.http_url}/console", timeout=10)
    assert page.status_code == 200 and "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert requests.get(f"{floe.http_url}/console/console.js", timeout=10).headers["Content-Type"].startswith(
        "text/javascript")

    # A wrong key is refused on the page.
    sign_in_by_keyboard(driver, floe.http_url, "fk_nope.wrong")
    wait_text(driver, "The key was not accepted")
    check_accessibility_basics(driver)

    # acme: topics, lag, a record.
    sign_in_by_keyboard(driver, floe.http_url, floe.keys["acme"])
    wait_text(driver, "orders")
    wait_text(driver, "Records produced per second")
    assert "globex" not in driver.find_element("id", "main").text
    check_accessibility_basics(driver)
    # More records between two samples (the page refreshes every 5 s): a rate above 0 shows.
    time.sleep(1)
    more = "\n".join(json.dumps({"partition_id": 1, "value": {"type": "STRING", "data": f"more-{i}"}})
                     for i in range(200))
    r = requests.post(f"{floe.v3}/topics/orders/records:bulk", data=more, timeout=30,
                      headers={**bearer(floe.keys["acme"]), "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    from selenium.webdriver.support.ui import WebDriverWait
    rate_cell = "return document.querySelector('tbody tr td:last-child').textContent"
    WebDriverWait(driver, 20).until(lambda d: d.execute_script(rate_cell) not in ("0", "…"))
    wait_text(driver, "210")  # the log end
    shot(driver, "acme-topics")
    # The page refreshes every 5 s; a keyboard user's focus stays on the link it was on.
    link = driver.find_element("css selector", "#view a[href='#/topics/orders']")
    driver.execute_script("arguments[0].focus()", link)
    assert driver.switch_to.active_element.get_attribute("href").endswith("#/topics/orders")
    time.sleep(6)
    assert driver.switch_to.active_element.get_attribute("href").endswith("#/topics/orders"), "focus lost on refresh"

    driver.get(f"{floe.http_url}/console#/groups/billing")
    wait_text(driver, "Lag by partition")
    main = driver.find_element("id", "main").text
    assert "lag 6 records" in main, main
    shot(driver, "acme-group")

    driver.get(f"{floe.http_url}/console#/records/orders")
    wait_text(driver, "acme-item-3")
    check_accessibility_basics(driver)
    shot(driver, "acme-records")

    # globex sees only its own, even when it asks for acme's pages by name.
    driver.find_element("id", "sign-out").click()
    sign_in_by_keyboard(driver, floe.http_url, floe.keys["globex"])
    wait_text(driver, "globex-secret")
    main = driver.find_element("id", "main").text
    assert "orders" not in main and "acme" not in main, main
    driver.get(f"{floe.http_url}/console#/topics/orders")
    wait_text(driver, "not found")
    driver.get(f"{floe.http_url}/console#/groups")
    wait_text(driver, "globex-readers")
    assert "billing" not in driver.find_element("id", "main").text
    shot(driver, "globex-topics")

    # The operator: cluster, tenants, usage.
    driver.find_element("id", "sign-out").click()
    sign_in_by_keyboard(driver, floe.http_url, OPERATOR_TOKEN, operator=True)
    wait_text(driver, "Metadata nodes")
    wait_text(driver, "leader")
    shot(driver, "operator-cluster")
    driver.get(f"{floe.http_url}/console#/tenants")
    wait_text(driver, "globex")
    wait_text(driver, "acme")
    driver.get(f"{floe.http_url}/console#/usage")
    wait_text(driver, "Bytes produced per minute")
    check_accessibility_basics(driver)
    shot(driver, "operator-usage")


@pytest.mark.timeout(240)
def test_a_server_that_asks_for_no_key_opens_on_its_topics(floe_factory, tmp_path, browser):
    """`floe dev` asks for no key by default: its console opens straight on the topics view, and
    after a sign-out shows the form (for the operator token) instead of signing in again."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-console-open", object_store=f"file://{objects}")
    cluster_id = requests.get(f"{floe.http_url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    r = requests.post(f"{floe.http_url}/v3/clusters/{cluster_id}/topics",
                      json={"topic_name": "open-orders", "partitions_count": 1}, timeout=30)
    assert r.status_code == 201, r.text
    driver = browser
    driver.get(f"{floe.http_url}/console")
    wait_text(driver, "open-orders")
    assert driver.execute_script("return location.hash") == "#/topics"
    assert not driver.find_element("id", "sign-in").is_displayed()
    assert "No key needed" in driver.find_element("id", "who").text
    check_accessibility_basics(driver)
    shot(driver, "open-topics")
    driver.find_element("id", "sign-out").click()
    driver.get(f"{floe.http_url}/console")
    assert driver.find_element("id", "sign-in").is_displayed()


def test_records_are_read_from_a_timestamp(tenants):
    """The record browser's time field: the HTTP read starts at the first record at or after it."""
    floe = tenants
    key = bearer(floe.keys["acme"])
    assert requests.post(f"{floe.v3}/topics", json={"topic_name": "stamped", "partitions_count": 1}, headers=key,
                         timeout=30).status_code == 201
    body = "\n".join(json.dumps({"partition_id": 0, "timestamp": f"2026-01-01T00:00:0{i}Z",
                                 "value": {"type": "STRING", "data": f"v{i}"}}) for i in range(5))
    r = requests.post(f"{floe.v3}/topics/stamped/records:bulk", data=body, timeout=30,
                      headers={**key, "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    read = f"{floe.v3}/topics/stamped/partitions/0/records"
    at_2s = 1767225602000
    got = requests.get(read, params={"timestamp": at_2s, "format": "string"}, headers=key, timeout=10).json()
    assert [r["value"]["data"] for r in got["records"]] == ["v2", "v3", "v4"], got
    past = requests.get(read, params={"timestamp": at_2s + 3600_000}, headers=key, timeout=10).json()
    assert past["records"] == [] and past["next_offset"] == 5, past
    both = requests.get(read, params={"timestamp": at_2s, "offset": "1"}, headers=key, timeout=10)
    assert both.status_code == 400 and "not both" in both.json()["message"]
    negative = requests.get(read, params={"timestamp": -5}, headers=key, timeout=10)
    assert negative.status_code == 400
