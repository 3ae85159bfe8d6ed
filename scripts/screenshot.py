"""A PNG of a page as headless Chromium draws it (the README's picture of a report).

Usage: python scripts/screenshot.py report.html docs/images/report.png [--width 1100] [--height H]
Needs Debian's chromium and chromium-driver, and selenium (the primary stack's lock).
"""

import argparse
import os
import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("page")
    parser.add_argument("output")
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=None, help="default: the whole page")
    args = parser.parse_args()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.set_window_size(args.width, 800)
        driver.get("file://" + os.path.abspath(args.page))
        height = args.height or driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(args.width, height)
        driver.save_screenshot(args.output)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
