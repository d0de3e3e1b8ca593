"""The agent-loop tasks of ``bench/agent_loops.py``: deterministic tools, a question, and checks.

Each task offers a few tools (one of them often a distractor that must not run, such as
``cancel_order``), asks one question, and judges the loop by what it did and said:

* the calls that were executed (the tools record every call they get, with its arguments), e.g.
  ``get_weather`` for Oslo was run and ``cancel_order`` was not;
* the final answer text, robustly: the numbers and keywords the tool results lead to are present
  (``39`` or ``39.2`` for 4 °C in Fahrenheit; thousands separators and the like are ignored), never an
  exact sentence.

The tools are plain functions of a JSON object, so every framework's adapter (``bench/loop_clients.py``)
wraps the same ones; they accept the argument spellings a small model tends to produce ("Paris, France",
"#A1234", "9:30") and answer an unknown value with an ``error`` object, as a real API would.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

SYSTEM = (
    "You are a helpful assistant. Use a tool when it can answer the question. "
    "Once you have the tool results, answer the user in one or two short sentences."
)

Args = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call a framework executed: the tool's name and the arguments it got."""

    name: str
    args: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.name}({json.dumps(self.args, ensure_ascii=False, sort_keys=True)})"


@dataclass(slots=True)
class Toolbox:
    """Where the tools record the calls they get (one per loop)."""

    calls: list[Call] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tool:
    """A deterministic function tool: its OpenAI definition and its implementation."""

    name: str
    description: str
    parameters: dict[str, Any]
    impl: Callable[[Args], Any]

    def openai(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def run(self, box: Toolbox, args: Any) -> str:
        """Record the call and answer with a JSON string (an ``error`` object for bad arguments)."""
        args = dict(args) if isinstance(args, Mapping) else {"_raw": args}
        box.calls.append(Call(self.name, args))
        try:
            result = self.impl(args)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, SyntaxError) as exc:
            result = {"error": f"{type(exc).__name__}: {exc}"}
        return json.dumps(result, ensure_ascii=False)


def _text(args: Args, *keys: str) -> str:
    for key in keys:
        value = args.get(key)
        if value is not None and str(value).strip():
            return str(value).strip()
    raise KeyError(f"missing argument {keys[0]!r}")


def _number(args: Args, *keys: str) -> float:
    raw = _text(args, *keys).replace(",", "")
    match = re.search(r"-?\d+(?:\.\d+)?", raw)
    if match is None:
        raise ValueError(f"not a number: {raw!r}")
    return float(match.group())


def _find(table: Mapping[str, Any], value: str) -> str:
    """The table key ``value`` names ("Paris, France" -> paris), else a ValueError."""
    folded = value.casefold()
    for key in table:
        if key in folded:
            return key
    raise ValueError(f"unknown: {value!r}")


def _tidy(value: float) -> float | int:
    return int(value) if value == int(value) else round(value, 2)


WEATHER = {
    "paris": (18, "sunny"),
    "tokyo": (25, "cloudy"),
    "oslo": (4, "light snow"),
    "lisbon": (21, "clear"),
    "berlin": (12, "rain"),
}


def get_weather(args: Args) -> dict[str, Any]:
    city = _find(WEATHER, _text(args, "city", "location"))
    temperature, condition = WEATHER[city]
    return {"city": city.title(), "temperature_celsius": temperature, "condition": condition}


def convert_temperature(args: Args) -> dict[str, Any]:
    value = _number(args, "value", "temperature", "celsius")
    target = _text(args, "to_unit", "unit").casefold()
    if target.startswith("f"):
        return {"fahrenheit": _tidy(value * 9 / 5 + 32)}
    if target.startswith("c"):
        return {"celsius": _tidy((value - 32) * 5 / 9)}
    raise ValueError(f"unknown unit {target!r}")


ORDERS = {
    "a1234": {"status": "shipped", "carrier": "DHL", "expected_delivery": "2025-03-18"},
    "b5678": {"status": "processing", "carrier": None, "expected_delivery": "2025-03-21"},
}


def _order(args: Args) -> str:
    return _find(ORDERS, re.sub(r"[^a-z0-9]", "", _text(args, "order_id", "id").casefold()))


def get_order_status(args: Args) -> dict[str, Any]:
    key = _order(args)
    return {"order_id": key.upper(), **ORDERS[key]}


def cancel_order(args: Args) -> dict[str, Any]:
    return {"order_id": _order(args).upper(), "cancelled": True}


def add_event(args: Args) -> dict[str, Any]:
    return {
        "ok": True,
        "event_id": "evt_1042",
        "title": _text(args, "title"),
        "date": _text(args, "date"),
        "time": str(args.get("time") or ""),
    }


def list_events(args: Args) -> dict[str, Any]:
    return {"date": _text(args, "date"), "events": []}


_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        if isinstance(node.op, ast.Pow) and abs(_evaluate(node.right)) > 64:
            raise ValueError("exponent too large")
        return float(_OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return float(_OPERATORS[type(node.op)](_evaluate(node.operand)))
    raise ValueError("only numbers and + - * / ** are allowed")


def calculator(args: Args) -> dict[str, Any]:
    expression = _text(args, "expression", "expr").replace("\u00d7", "*").replace("^", "**")
    return {"expression": expression, "result": _tidy(_evaluate(ast.parse(expression, mode="eval").body))}


PEOPLE = {"alice": {"name": "Alice Moreau", "city": "Lisbon", "team": "design"}}


def get_colleague(args: Args) -> dict[str, Any]:
    return PEOPLE[_find(PEOPLE, _text(args, "name"))]


RATES = {("usd", "eur"): 0.92, ("eur", "usd"): 1.09, ("gbp", "eur"): 1.17}


def convert_currency(args: Args) -> dict[str, Any]:
    amount = _number(args, "amount")
    source = _currency(_text(args, "from_currency", "from"))
    target = _currency(_text(args, "to_currency", "to"))
    rate = RATES[(source, target)]
    return {"amount": _tidy(amount), "from": source.upper(), "to": target.upper(), "result": round(amount * rate, 2)}


def _currency(value: str) -> str:
    folded = value.casefold()
    for code, words in (("usd", ("usd", "dollar", "$")), ("eur", ("eur", "euro", "€")), ("gbp", ("gbp", "pound"))):
        if any(word in folded for word in words):
            return code
    raise ValueError(f"unknown currency {value!r}")


def convert_length(args: Args) -> dict[str, Any]:
    value = _number(args, "value", "amount")
    source, target = _text(args, "from_unit").casefold(), _text(args, "to_unit").casefold()
    if source.startswith("mi") and target.startswith("k"):
        return {"kilometers": round(value * 1.609344, 2)}
    if source.startswith("k") and target.startswith("mi"):
        return {"miles": round(value / 1.609344, 2)}
    raise ValueError(f"unsupported conversion {source!r} -> {target!r}")


STOCKS = {"aapl": ("Apple", 231.5), "msft": ("Microsoft", 418.2), "nvda": ("NVIDIA", 129.8)}


def get_stock_price(args: Args) -> dict[str, Any]:
    value = _text(args, "symbol", "ticker").casefold()
    symbol = next((key for key, (name, _) in STOCKS.items() if key in value or name.casefold() in value), None)
    if symbol is None:
        raise ValueError(f"unknown symbol {value!r}")
    return {"symbol": symbol.upper(), "price_usd": STOCKS[symbol][1]}


def place_stock_order(args: Args) -> dict[str, Any]:
    return {"order": "placed", "symbol": _text(args, "symbol").upper(), "shares": _number(args, "shares")}


CLOCKS = {"berlin": ("14:05", "CET"), "new york": ("08:05", "EST"), "sydney": ("00:05", "AEDT")}


def get_local_time(args: Args) -> dict[str, Any]:
    city = _find(CLOCKS, _text(args, "city", "location"))
    return {"city": city.title(), "local_time": CLOCKS[city][0], "timezone": CLOCKS[city][1]}


WORDS = {"ephemeral": "lasting for a very short time", "ubiquitous": "present, appearing or found everywhere"}


def define_word(args: Args) -> dict[str, Any]:
    word = _find(WORDS, _text(args, "word", "term"))
    return {"word": word, "definition": WORDS[word]}


DISTANCES = {frozenset(("paris", "berlin")): 878, frozenset(("paris", "madrid")): 1054}


def get_distance(args: Args) -> dict[str, Any]:
    cities = frozenset(_text(args, key).casefold().split(",")[0].strip() for key in ("from_city", "to_city"))
    return {"kilometers": DISTANCES[cities]}


CATALOG = (
    {"name": "SoundLite Air", "kind": "wireless headphones", "price_usd": 79},
    {"name": "BassPro Max", "kind": "wireless headphones", "price_usd": 149},
    {"name": "StudioWire 2", "kind": "wired headphones", "price_usd": 59},
)


def search_products(args: Args) -> dict[str, Any]:
    words = set(re.findall(r"[a-z]+", _text(args, "query", "q").casefold())) - {"under", "below", "cheap"}
    found = [item for item in CATALOG if words & set(str(item["kind"]).split())]
    return {"results": found}


FLIGHTS = {
    "lh400": {"flight": "LH400", "status": "delayed", "delay_minutes": 35, "gate": "B22"},
    "ba117": {"flight": "BA117", "status": "on time", "delay_minutes": 0, "gate": "A7"},
}


def get_flight_status(args: Args) -> dict[str, Any]:
    return FLIGHTS[_find(FLIGHTS, re.sub(r"[^a-z0-9]", "", _text(args, "flight_number", "flight").casefold()))]


def book_table(args: Args) -> dict[str, Any]:
    """Every table at 20:00 is taken: the answer must say so (and offer 21:30), not claim a booking."""
    return {"booked": False, "reason": "fully booked at 20:00", "next_free_time": "21:30"}


INVENTORY = {"blue mug": 0, "red mug": 12}


def check_stock(args: Args) -> dict[str, Any]:
    item = _find(INVENTORY, _text(args, "item", "product", "name").casefold())
    return {"item": item, "in_stock": INVENTORY[item]}


USERS = {"bob@example.com": "U-77"}
USER_ORDERS = {"u-77": ["A-301", "A-322", "A-340"]}


def find_user(args: Args) -> dict[str, Any]:
    email = _find(USERS, _text(args, "email").casefold())
    return {"user_id": USERS[email], "email": email, "name": "Bob Stone"}


def list_orders(args: Args) -> dict[str, Any]:
    orders = USER_ORDERS[_find(USER_ORDERS, _text(args, "user_id", "id").casefold())]
    return {"orders": orders, "count": len(orders)}


POPULATIONS = {"lisbon": 545_000, "porto": 232_000}


def get_population(args: Args) -> dict[str, Any]:
    city = _find(POPULATIONS, _text(args, "city"))
    return {"city": city.title(), "population": POPULATIONS[city]}


PACKAGES = {"1z999": {"tracking_number": "1Z999", "status": "in transit", "expected_delivery": "Friday"}}


def track_package(args: Args) -> dict[str, Any]:
    return PACKAGES[_find(PACKAGES, re.sub(r"[^a-z0-9]", "", _text(args, "tracking_number", "id").casefold()))]


CONTACTS = {"maria": {"name": "Maria Santos", "phone": "+34 600 123 456"}}


def lookup_contact(args: Args) -> dict[str, Any]:
    return CONTACTS[_find(CONTACTS, _text(args, "name").casefold().split()[0])]


def get_showtimes(args: Args) -> dict[str, Any]:
    movie, city = _text(args, "movie", "title").casefold(), _text(args, "city").casefold()
    if "dune" not in movie or "madrid" not in city:
        raise ValueError(f"no showtimes for {movie!r} in {city!r}")
    return {"movie": "Dune", "city": "Madrid", "times": ["18:30", "21:00"]}


def calculate_tip(args: Args) -> dict[str, Any]:
    amount, percent = _number(args, "amount", "bill"), _number(args, "percent", "percentage")
    return {"tip": _tidy(amount * percent / 100)}


AIRPORTS = {"lisbon": {"code": "LIS", "name": "Humberto Delgado Airport"}}
WAITS = {"lis": 25}


def find_airport(args: Args) -> dict[str, Any]:
    return AIRPORTS[_find(AIRPORTS, _text(args, "city"))]


def get_security_wait(args: Args) -> dict[str, Any]:
    code = _find(WAITS, _text(args, "airport_code", "code").casefold())
    return {"airport_code": code.upper(), "minutes": WAITS[code]}


HOTELS = {"ritz": 450, "savoy": 380}


def get_room_price(args: Args) -> dict[str, Any]:
    hotel = _find(HOTELS, _text(args, "hotel", "name").casefold().replace("the ", ""))
    return {"hotel": hotel.title(), "price_per_night_eur": HOTELS[hotel]}


RECIPES = {"sourdough": {"name": "Sourdough loaf", "prep_minutes": 40, "bake_minutes": 45, "oven_celsius": 230}}


def get_recipe(args: Args) -> dict[str, Any]:
    return RECIPES[_find(RECIPES, _text(args, "name", "recipe"))]


def set_timer(args: Args) -> dict[str, Any]:
    return {"timer_set": True, "minutes": _tidy(_number(args, "minutes", "duration"))}


DEPARTURES = {("central", "12"): ["14:05", "14:35"]}


def next_departures(args: Args) -> dict[str, Any]:
    stop, line = _text(args, "stop", "station").casefold(), re.sub(r"\D", "", _text(args, "line", "route"))
    for (known_stop, known_line), times in DEPARTURES.items():
        if known_stop in stop and line == known_line:
            return {"line": known_line, "stop": "Central Station", "departures": times}
    raise ValueError(f"no departures for line {line!r} at {stop!r}")


DEVICES = [{"id": "d-1", "name": "Laptop"}, {"id": "d-2", "name": "Phone"}]
BATTERY = {"d-1": 64, "d-2": 18}


def list_devices(args: Args) -> dict[str, Any]:
    return {"devices": DEVICES}


def get_battery(args: Args) -> dict[str, Any]:
    device = _find(BATTERY, _text(args, "device_id", "id").casefold())
    return {"device_id": device, "battery_percent": BATTERY[device]}


ELEVATIONS = {"mont blanc": 4806, "matterhorn": 4478}


def get_elevation(args: Args) -> dict[str, Any]:
    place = _find(ELEVATIONS, _text(args, "place", "name", "mountain").replace("-", " "))
    return {"place": place.title(), "elevation_m": ELEVATIONS[place]}


def request_refund(args: Args) -> dict[str, Any]:
    order = re.sub(r"[^a-z0-9]", "", _text(args, "order_id", "id").casefold())
    if "b552" not in order:
        raise ValueError(f"unknown order {order!r}")
    return {"order_id": "B-552", "refunded": False, "reason": "the 30-day refund window closed on 2026-10-01"}


def apply_discount(args: Args) -> dict[str, Any]:
    price, percent = _number(args, "price", "amount"), _number(args, "percent", "discount")
    return {"final_price": _tidy(price * (100 - percent) / 100)}


ROOMS = {"orion": {"room": "Orion", "time": "15:00", "free": False, "booked_by": "Sales team"}}


def check_room(args: Args) -> dict[str, Any]:
    return ROOMS[_find(ROOMS, _text(args, "room", "name").casefold())]


TICKETS = {"t-104": {"ticket": "T-104", "status": "waiting on customer", "assignee": "Priya"}}


def get_ticket(args: Args) -> dict[str, Any]:
    ticket = re.sub(r"[^a-z0-9]", "", _text(args, "ticket_id", "id", "ticket").casefold())
    for key, value in TICKETS.items():
        if key.replace("-", "") in ticket:
            return value
    raise ValueError(f"no ticket {ticket!r}")


def split_bill(args: Args) -> dict[str, Any]:
    total, people = _number(args, "total", "amount"), _number(args, "people", "persons")
    if people < 1:
        raise ValueError("people must be at least 1")
    return {"per_person": _tidy(round(total / people, 2))}


def get_weekday(args: Args) -> dict[str, Any]:
    day = date.fromisoformat(_text(args, "date", "day").strip())
    return {"date": day.isoformat(), "weekday": day.strftime("%A")}


FARES = {("oslo", "rome"): [("SK-4711", 189), ("FR-1802", 74), ("AZ-611", 142)]}


def search_flights(args: Args) -> dict[str, Any]:
    origin, destination = _text(args, "origin", "from").casefold(), _text(args, "destination", "to").casefold()
    for (start, end), flights in FARES.items():
        if start in origin and end in destination:
            return {"flights": [{"flight_id": fid, "price_eur": price} for fid, price in flights]}
    raise ValueError(f"no flights from {origin!r} to {destination!r}")


def book_flight(args: Args) -> dict[str, Any]:
    flight = re.sub(r"[^a-z0-9]", "", _text(args, "flight_id", "id", "flight").casefold())
    for flights in FARES.values():
        for fid, price in flights:
            if fid.casefold().replace("-", "") == flight:
                return {"booked": True, "flight_id": fid, "price_eur": price, "booking_reference": "QX7P2"}
    raise ValueError(f"unknown flight: {flight!r}")


AIR_QUALITY = {"delhi": 182, "zurich": 21}


def get_air_quality(args: Args) -> dict[str, Any]:
    city = _find(AIR_QUALITY, _text(args, "city", "location"))
    return {"city": city.title(), "aqi": AIR_QUALITY[city]}


def set_thermostat(args: Args) -> dict[str, Any]:
    mode = _text(args, "mode").casefold()
    if mode not in ("eco", "comfort", "off"):
        raise ValueError(f"unknown mode {mode!r}")
    return {"thermostat": "Living room", "mode": mode, "ok": True}


PARCEL_FEES = {"canada": 24.9, "france": 12.5}


def get_parcel_fee(args: Args) -> dict[str, Any]:
    country = _find(PARCEL_FEES, _text(args, "country", "destination"))
    weight = _number(args, "weight_kg", "weight")
    if weight > 30:
        raise ValueError("parcels over 30 kg are not accepted")
    return {"country": country.title(), "weight_kg": _tidy(weight), "fee_eur": PARCEL_FEES[country]}


CALORIES = {"banana": 105, "apple": 95}


def get_calories(args: Args) -> dict[str, Any]:
    food = _find(CALORIES, _text(args, "food", "item", "name"))
    return {"food": food, "serving": "1 medium", "kcal": CALORIES[food]}


DICTIONARY = {("library", "spanish"): "biblioteca", ("library", "french"): "bibliothèque"}


def translate_word(args: Args) -> dict[str, Any]:
    word, language = _text(args, "word", "text").casefold(), _text(args, "language", "target_language").casefold()
    for (known, lang), translation in DICTIONARY.items():
        if known in word and lang[:2] in language:
            return {"word": known, "language": lang.title(), "translation": translation}
    raise ValueError(f"no translation of {word!r} into {language!r}")


BOOKS = {"dune": "978-0441013593"}
COPIES = {"9780441013593": {"available_copies": 2, "branch": "Main Library"}}


def find_book(args: Args) -> dict[str, Any]:
    title = _find(BOOKS, _text(args, "title", "name"))
    return {"title": title.title(), "author": "Frank Herbert", "isbn": BOOKS[title]}


def library_availability(args: Args) -> dict[str, Any]:
    isbn = re.sub(r"\D", "", _text(args, "isbn", "id"))
    if isbn not in COPIES:
        raise ValueError(f"unknown isbn {isbn!r}")
    return {"isbn": isbn, **COPIES[isbn]}


OPENING_HOURS = {"louvre": ("Louvre", "09:00", "18:00"), "prado": ("Prado", "10:00", "20:00")}


def get_opening_hours(args: Args) -> dict[str, Any]:
    name, opens, closes = OPENING_HOURS[_find(OPENING_HOURS, _text(args, "museum", "place", "name"))]
    return {"museum": name, "opens": opens, "closes": closes}


def set_alarm(args: Args) -> dict[str, Any]:
    match = re.search(r"(\d{1,2})[:.h](\d{2})", _text(args, "time"))
    if match is None:
        raise ValueError("time must be HH:MM")
    return {"alarm_set": True, "time": f"{int(match[1]):02d}:{match[2]}"}


def renew_loan(args: Args) -> dict[str, Any]:
    barcode = re.sub(r"\D", "", _text(args, "barcode", "id", "book"))
    if barcode != "4471":
        raise ValueError(f"no loan with barcode {barcode!r}")
    return {"barcode": barcode, "renewed": False, "reason": "another reader has reserved this book"}


def days_between(args: Args) -> dict[str, Any]:
    start = date.fromisoformat(_text(args, "start", "from").strip())
    end = date.fromisoformat(_text(args, "end", "to").strip())
    return {"start": start.isoformat(), "end": end.isoformat(), "days": (end - start).days}


# ---- the eighth set's tools (written 2026-11-29, before any run) ----------------------------------

SHARE_PRICES = {"apple": ("AAPL", 187.44), "aapl": ("AAPL", 187.44), "nokia": ("NOKIA", 4.12)}


def get_share_price(args: Args) -> dict[str, Any]:
    symbol, price = SHARE_PRICES[_find(SHARE_PRICES, _text(args, "symbol", "company", "ticker", "name"))]
    return {"symbol": symbol, "price": price, "currency": "USD"}


UNIT_FACTORS = {("mi", "km"): 1.609344, ("km", "mi"): 1 / 1.609344, ("kg", "lb"): 2.2046226}


def _unit(raw: str) -> str:
    folded = raw.casefold().strip()
    for short, words in (("mi", ("mile",)), ("km", ("kilomet", "km")), ("kg", ("kilogram", "kg")), ("lb", ("pound",))):
        if folded == short or any(word in folded for word in words):
            return short
    raise ValueError(f"unknown unit: {raw!r}")


def convert_units(args: Args) -> dict[str, Any]:
    value = _number(args, "value", "amount", "quantity")
    source, target = _unit(_text(args, "from_unit", "from", "unit")), _unit(_text(args, "to_unit", "to"))
    return {"value": _tidy(value), "from": source, "to": target, "result": _tidy(value * UNIT_FACTORS[source, target])}


def get_train_status(args: Args) -> dict[str, Any]:
    number = re.sub(r"\D", "", _text(args, "train_number", "train", "number"))
    if number != "6611":
        raise ValueError(f"no train {number!r} today")
    return {"train": "6611", "destination": "Lyon", "on_time": False, "delay_minutes": 25}


RESTAURANTS = {("italian", "turin"): ("Trattoria Sole", "R-77")}


def find_restaurant(args: Args) -> dict[str, Any]:
    cuisine, city = _text(args, "cuisine", "type").casefold(), _text(args, "city", "location").casefold()
    for (kind, town), (name, restaurant_id) in RESTAURANTS.items():
        if kind in cuisine and town in city:
            return {"name": name, "restaurant_id": restaurant_id, "city": town.title()}
    return {"results": [], "note": "no restaurant found"}


def reserve_table(args: Args) -> dict[str, Any]:
    restaurant_id = _text(args, "restaurant_id", "id").upper()
    if restaurant_id != "R-77":
        raise ValueError(f"no restaurant {restaurant_id!r}")
    match = re.search(r"(\d{1,2})[:.h](\d{2})", _text(args, "time"))
    if match is None:
        raise ValueError("time must be HH:MM")
    people = int(_number(args, "people", "party_size", "guests"))
    return {
        "booked": True,
        "restaurant_id": "R-77",
        "time": f"{int(match[1]):02d}:{match[2]}",
        "people": people,
        "confirmation": "C-5521",
    }


FX_RATES = {("usd", "jpy"): 151.2, ("eur", "usd"): 1.08}


def get_exchange_rate(args: Args) -> dict[str, Any]:
    source, target = (
        _text(args, "from_currency", "base", "from").casefold(),
        _text(args, "to_currency", "to").casefold(),
    )
    rate = FX_RATES[(source[:3], target[:3])]
    return {"from": source[:3].upper(), "to": target[:3].upper(), "rate": rate}


def find_events(args: Args) -> dict[str, Any]:
    city = _text(args, "city", "location")
    return {"city": city.strip().title(), "events": []}


def send_sms(args: Args) -> dict[str, Any]:
    to, message = _text(args, "to", "number", "phone"), _text(args, "message", "text", "body")
    if len(re.sub(r"\D", "", to)) < 6:
        raise ValueError(f"not a phone number: {to!r}")
    return {"sent": True, "to": to, "characters": len(message)}


# ---- the ninth set's tools (written 2026-11-29, session after stop 48, before any run) ---------------


def calculate_bmi(args: Args) -> dict[str, Any]:
    weight, height = _number(args, "weight_kg", "weight"), _number(args, "height_m", "height")
    if height > 3:  # centimetres
        height /= 100
    if not (20 <= weight <= 300 and 1.0 <= height <= 2.5):
        raise ValueError(f"implausible weight {weight} kg or height {height} m")
    return {"bmi": round(weight / height**2, 1), "category": "normal"}


PHRASES = {("good morning", "german"): "Guten Morgen", ("thank you", "japanese"): "arigatou gozaimasu"}
LANGUAGE_CODES = {"german": "de", "japanese": "ja"}  # ISO 639-1, as translation services take them


def translate_text(args: Args) -> dict[str, Any]:
    text = _text(args, "text", "phrase").casefold().strip(" .!'\"")
    language = _text(args, "target_language", "language", "to").casefold().strip()
    for (phrase, tongue), translated in PHRASES.items():
        if phrase == text and (tongue in language or language == LANGUAGE_CODES[tongue]):
            return {"translation": translated, "language": tongue.title()}
    raise ValueError(f"cannot translate {text!r} into {language!r}")


ACCOUNTS = {"carol": ("Carol Jensen", "AC-9031")}
BALANCES = {"ac-9031": (1520.75, "EUR")}


def find_account(args: Args) -> dict[str, Any]:
    name, account_id = ACCOUNTS[_find(ACCOUNTS, _text(args, "name", "customer", "holder"))]
    return {"name": name, "account_id": account_id}


def get_balance(args: Args) -> dict[str, Any]:
    account_id = _text(args, "account_id", "id").strip().casefold()
    if account_id not in BALANCES:
        raise ValueError(f"no account {account_id.upper()!r}")
    amount, currency = BALANCES[account_id]
    return {"account_id": account_id.upper(), "balance": amount, "currency": currency}


HOTEL_AMENITIES = {"grand hotel": ["free wifi", "pool", "gym", "restaurant"]}


def get_hotel_amenities(args: Args) -> dict[str, Any]:
    hotel = _find(HOTEL_AMENITIES, _text(args, "hotel", "name", "hotel_name"))
    return {"hotel": hotel.title(), "amenities": HOTEL_AMENITIES[hotel]}


TICKET_PRICES = {"louvre": 22.0, "eiffel tower": 29.4}


def get_ticket_price(args: Args) -> dict[str, Any]:
    place = _find(TICKET_PRICES, _text(args, "attraction", "place", "name"))
    return {"attraction": place.title(), "adult_price": TICKET_PRICES[place], "currency": "EUR"}


MOVIES = {"inception": {"title": "Inception", "director": "Christopher Nolan", "year": 2010, "runtime_minutes": 148}}


def get_movie_details(args: Args) -> dict[str, Any]:
    return dict(MOVIES[_find(MOVIES, _text(args, "title", "movie", "name"))])


def get_uv_index(args: Args) -> dict[str, Any]:
    city = _text(args, "city", "location")
    if "sydney" not in city.casefold():
        raise ValueError(f"no UV reading for {city!r}")
    return {"city": "Sydney", "uv_index": 9, "level": "very high"}


def get_pollen_count(args: Args) -> dict[str, Any]:
    city = _text(args, "city", "location")
    if "sydney" not in city.casefold():
        raise ValueError(f"no pollen reading for {city!r}")
    return {"city": "Sydney", "pollen": "low", "grains_per_m3": 12}


# ---- the tenth set's tools (written 2026-11-29, session after stop 48, before any run) ---------------

FLIGHT_PRICES = {("madrid", "berlin"): 129}


def get_flight_price(args: Args) -> dict[str, Any]:
    origin, destination = _text(args, "origin", "from").casefold(), _text(args, "destination", "to").casefold()
    for (start, end), price in FLIGHT_PRICES.items():
        if start in origin and end in destination:
            return {"origin": start.title(), "destination": end.title(), "price_eur": price, "airline": "Iberia"}
    raise ValueError(f"no flights from {origin!r} to {destination!r}")


def check_visa(args: Args) -> dict[str, Any]:
    nationality, country = _text(args, "nationality", "passport", "citizenship"), _text(args, "country", "destination")
    if "brazil" not in nationality.casefold() or "japan" not in country.casefold():
        raise ValueError(f"no visa rule for {nationality!r} visiting {country!r}")
    return {"nationality": "Brazilian", "country": "Japan", "visa_required": False, "max_stay_days": 90}


SYNONYMS = {"happy": ["joyful", "cheerful", "content"]}


def find_synonyms(args: Args) -> dict[str, Any]:
    word = _find(SYNONYMS, _text(args, "word", "term"))
    return {"word": word, "synonyms": SYNONYMS[word]}


EMPLOYEES = {"tom": {"name": "Tom Becker", "team": "payments", "manager": "Dana Lee"}}
PHONES = {"dana lee": "+1 555 0199"}


def get_employee(args: Args) -> dict[str, Any]:
    return dict(EMPLOYEES[_find(EMPLOYEES, _text(args, "name", "employee"))])


def get_phone_number(args: Args) -> dict[str, Any]:
    person = _find(PHONES, _text(args, "person", "name", "contact"))
    return {"person": person.title(), "phone": PHONES[person]}


def create_reminder(args: Args) -> dict[str, Any]:
    text, when = _text(args, "text", "title", "message"), _text(args, "time", "when")
    return {"created": True, "text": text, "time": when, "reminder_id": "RM-31"}


NUTRITION = {"chicken breast": {"per_100g": {"protein_g": 31, "fat_g": 3.6, "kcal": 165}}}


def get_nutrition(args: Args) -> dict[str, Any]:
    food = _find(NUTRITION, _text(args, "food", "item"))
    return {"food": food, **NUTRITION[food]}


AREAS = {"canada": 9_984_670, "china": 9_596_961}


def get_country_area(args: Args) -> dict[str, Any]:
    country = _find(AREAS, _text(args, "country", "name"))
    return {"country": country.title(), "area_km2": AREAS[country]}


STOCK = {"blue kettle": {"product": "Blue kettle", "in_stock": 0, "restock_date": "2026-12-08"}}


def get_stock_level(args: Args) -> dict[str, Any]:
    return dict(STOCK[_find(STOCK, _text(args, "product", "item", "name"))])


BUS_TIMES = {"central": ["14:05 line 7 to Airport", "14:20 line 3 to Harbour", "14:35 line 7 to Airport"]}


def get_bus_times(args: Args) -> dict[str, Any]:
    stop = _find(BUS_TIMES, _text(args, "stop", "station", "stop_name"))
    return {"stop": "Central Station", "next_departures": BUS_TIMES[stop]}


INGREDIENTS = {"pancake": ["flour", "milk", "eggs", "butter", "a pinch of salt"]}


def get_ingredients(args: Args) -> dict[str, Any]:
    dish = _find(INGREDIENTS, _text(args, "dish", "recipe", "name"))
    return {"dish": "pancakes", "ingredients": INGREDIENTS[dish], "serves": 4}


SHOP_ORDERS = {"ana@example.com": {"order_id": "ORD-5512", "status": "shipped"}}
DELIVERIES = {"ord-5512": "2026-12-03"}


def find_order(args: Args) -> dict[str, Any]:
    return dict(SHOP_ORDERS[_find(SHOP_ORDERS, _text(args, "email", "customer_email"))])


def get_delivery_date(args: Args) -> dict[str, Any]:
    order = _find(DELIVERIES, _text(args, "order_id", "order", "id"))
    return {"order_id": order.upper(), "estimated_delivery": DELIVERIES[order]}


SUNRISE = {"oslo": "09:12", "madrid": "08:27"}


def get_sunrise(args: Args) -> dict[str, Any]:
    city = _find(SUNRISE, _text(args, "city", "location"))
    return {"city": city.title(), "date": "tomorrow", "sunrise": SUNRISE[city]}


def add_calendar_event(args: Args) -> dict[str, Any]:
    title, date = _text(args, "title", "name", "event"), _text(args, "date", "day")
    return {"event_id": "EV-301", "title": title, "date": date, "time": args.get("time"), "status": "added"}


def search_jobs(args: Args) -> dict[str, Any]:
    return {"query": _text(args, "title", "query", "role", "job_title"), "city": args.get("city"), "results": []}


FUEL = {"hamburg": {"diesel": 1.689, "petrol": 1.799}}


def get_fuel_price(args: Args) -> dict[str, Any]:
    city = _find(FUEL, _text(args, "city", "location"))
    fuel = _find(FUEL[city], _text(args, "fuel", "fuel_type", "type"))
    return {"city": city.title(), "fuel": fuel, "price_per_litre": FUEL[city][fuel], "currency": "EUR"}


DOMAINS = {"brightpaws.com": {"available": False, "registered_on": "2024-05-02"}}


def check_domain(args: Args) -> dict[str, Any]:
    domain = _text(args, "domain", "name").casefold().removeprefix("www.")
    return {"domain": domain, **DOMAINS.get(domain, {"available": True})}


STUDENTS = {"mia": "S-88"}
GRADES = {"s-88": {"maths": 38, "english": 71, "pass_mark": 50}}


def find_student(args: Args) -> dict[str, Any]:
    student = _find(STUDENTS, _text(args, "name", "student"))
    return {"name": student.title(), "student_id": STUDENTS[student]}


def get_grades(args: Args) -> dict[str, Any]:
    student = _find(GRADES, _text(args, "student_id", "id"))
    return {
        "student_id": student.upper(),
        "grades": {k: v for k, v in GRADES[student].items() if k != "pass_mark"},
        "pass_mark": GRADES[student]["pass_mark"],
    }


UTC_OFFSETS = {"london": 0, "chicago": -6, "tokyo": 9}


def convert_time_zone(args: Args) -> dict[str, Any]:
    clock = _text(args, "time", "local_time")
    source = _find(UTC_OFFSETS, _text(args, "from_city", "from", "source_city"))
    target = _find(UTC_OFFSETS, _text(args, "to_city", "to", "target_city"))
    match = re.fullmatch(r"\s*(\d{1,2})(?::(\d{2}))?\s*", clock)
    if match is None:
        raise ValueError(f"not a time (HH:MM): {clock!r}")
    minutes = int(match.group(1)) * 60 + int(match.group(2) or 0) + (UTC_OFFSETS[target] - UTC_OFFSETS[source]) * 60
    minutes %= 24 * 60
    return {"from": source.title(), "to": target.title(), "time": f"{minutes // 60:02d}:{minutes % 60:02d}"}


TIDES = {"brighton": {"high_tide": ["05:42", "18:03"], "low_tide": ["11:55"]}}


def get_tide_times(args: Args) -> dict[str, Any]:
    place = _find(TIDES, _text(args, "place", "location", "city"))
    return {"place": place.title(), "date": "today", **TIDES[place]}


def order_pizza(args: Args) -> dict[str, Any]:
    size, toppings = _text(args, "size"), args.get("toppings", [])
    if not isinstance(toppings, list):
        raise ValueError("toppings must be a list")
    return {"order_id": "PZ-301", "size": size, "toppings": toppings, "eta_minutes": 35}


def set_light(args: Args) -> dict[str, Any]:
    room, level = _text(args, "room"), int(_number(args, "brightness", "level"))
    if not 0 <= level <= 100:
        raise ValueError(f"brightness out of range: {level}")
    return {"room": room, "brightness": level, "ok": True}


INVOICES = {"inv-7": {"invoice_id": "INV-7", "amount": 84.5, "currency": "EUR", "status": "unpaid"}}


def get_invoice(args: Args) -> dict[str, Any]:
    return dict(INVOICES[_find(INVOICES, _text(args, "invoice_id", "id"))])


def pay_invoice(args: Args) -> dict[str, Any]:
    invoice = INVOICES[_find(INVOICES, _text(args, "invoice_id", "id"))]
    return {"invoice_id": invoice["invoice_id"], "paid": True, "amount": invoice["amount"], "confirmation": "PAY-5531"}


MATCHES = {
    "benfica": {"home_team": "Benfica", "away_team": "Porto", "home_goals": 1, "away_goals": 2, "date": "2026-11-28"}
}


def get_last_match(args: Args) -> dict[str, Any]:
    return dict(MATCHES[_find(MATCHES, _text(args, "team", "name"))])


RECIPES_BY_INGREDIENT = {"lentil": ["lentil soup", "dal tadka", "warm lentil salad"]}


def search_recipes(args: Args) -> dict[str, Any]:
    ingredient = _find(RECIPES_BY_INGREDIENT, _text(args, "ingredient", "query"))
    return {"ingredient": ingredient, "recipes": RECIPES_BY_INGREDIENT[ingredient]}


PULL_REQUESTS = {
    482: {"number": 482, "title": "Cache parsed schemas", "state": "open", "merged": False, "approvals": 1}
}


def get_pull_request(args: Args) -> dict[str, Any]:
    number = int(_number(args, "number", "pr_number", "id"))
    if number not in PULL_REQUESTS:
        raise ValueError(f"no pull request #{number}")
    return dict(PULL_REQUESTS[number])


GRAMS_PER_CUP = {"flour": 125, "sugar": 200}


def convert_cooking(args: Args) -> dict[str, Any]:
    amount = _number(args, "amount", "quantity")
    ingredient = _find(GRAMS_PER_CUP, _text(args, "ingredient"))
    if not _text(args, "from_unit").casefold().startswith("cup") or not _text(args, "to_unit").startswith("gram"):
        raise ValueError("only cups to grams are known here")
    return {"amount": amount, "ingredient": ingredient, "grams": _tidy(amount * GRAMS_PER_CUP[ingredient])}


def get_device_batteries(args: Args) -> dict[str, Any]:
    return {
        "devices": [
            {"device": "phone", "battery": 64},
            {"device": "watch", "battery": 12},
            {"device": "laptop", "battery": 88},
        ]
    }


def set_device_power(args: Args) -> dict[str, Any]:
    device, on = _text(args, "device", "name"), args.get("on")
    if not isinstance(on, bool):
        raise ValueError(f"'on' must be true or false, got {on!r}")
    return {"device": device, "on": on, "ok": True}


ATTENDEES = {"launch party": {"event": "Launch party", "attending": 47, "declined": 5}}


def get_event_attendees(args: Args) -> dict[str, Any]:
    return dict(ATTENDEES[_find(ATTENDEES, _text(args, "event", "event_name", "name"))])


def create_contact(args: Args) -> dict[str, Any]:
    contact = args.get("contact")
    if not isinstance(contact, dict) or not contact.get("name") or not contact.get("phone"):
        raise ValueError("contact must be an object with a name and a phone")
    return {"saved": True, "contact_id": "CT-88", "name": contact["name"], "phone": contact["phone"]}


def calculate_vat(args: Args) -> dict[str, Any]:
    amount, rate = _number(args, "amount", "net_amount"), _number(args, "rate", "vat_rate", "percent")
    rate = rate * 100 if rate < 1 else rate
    return {"amount": _tidy(amount), "rate_percent": _tidy(rate), "vat": _tidy(amount * rate / 100)}


HUMIDITY = {"paris": 64, "rome": 58}


def get_humidity(args: Args) -> dict[str, Any]:
    city = _text(args, "city").casefold()
    if city not in HUMIDITY:
        close = [known.title() for known in HUMIDITY if known[:4] == city[:4]]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown city {_text(args, 'city')!r}{hint}")
    return {"city": city.title(), "humidity_percent": HUMIDITY[city]}


ROAD_FROM_BERLIN_KM = {"prague": 350, "vienna": 680}


def distance_between(args: Args) -> dict[str, Any]:
    a, b = _text(args, "from_city", "origin").casefold(), _text(args, "to_city", "destination").casefold()
    other = b if "berlin" in a else a
    if "berlin" not in a + b:
        raise ValueError("only distances from Berlin are known here")
    city = _find(ROAD_FROM_BERLIN_KM, other)
    return {"from": "Berlin", "to": city.title(), "road_km": ROAD_FROM_BERLIN_KM[city]}


def _obj(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


STR = {"type": "string"}
NUM = {"type": "number"}
TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "get_weather",
            "Get the current weather in a city: temperature in Celsius and conditions.",
            _obj({"city": {"type": "string", "description": "City name, e.g. Paris"}}, ["city"]),
            get_weather,
        ),
        Tool(
            "convert_temperature",
            "Convert a temperature between Celsius and Fahrenheit.",
            _obj(
                {"value": NUM, "to_unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["value", "to_unit"]
            ),
            convert_temperature,
        ),
        Tool(
            "get_order_status",
            "Look up the status of a customer's order by its order id.",
            _obj({"order_id": {"type": "string", "description": "e.g. A1234"}}, ["order_id"]),
            get_order_status,
        ),
        Tool(
            "cancel_order",
            "Cancel a customer's order by its order id. Only when the customer asks to cancel.",
            _obj({"order_id": STR}, ["order_id"]),
            cancel_order,
        ),
        Tool(
            "add_event",
            "Add an event to the user's calendar.",
            _obj(
                {
                    "title": STR,
                    "date": {"type": "string", "description": "YYYY-MM-DD"},
                    "time": {"type": "string", "description": "HH:MM, 24-hour"},
                },
                ["title", "date", "time"],
            ),
            add_event,
        ),
        Tool(
            "list_events",
            "List the events in the user's calendar on a date.",
            _obj({"date": {"type": "string", "description": "YYYY-MM-DD"}}, ["date"]),
            list_events,
        ),
        Tool(
            "calculator",
            "Evaluate an arithmetic expression, e.g. 2 * (3 + 4).",
            _obj({"expression": STR}, ["expression"]),
            calculator,
        ),
        Tool(
            "get_colleague",
            "Look up a colleague by first name: full name, the city they live in, their team.",
            _obj({"name": STR}, ["name"]),
            get_colleague,
        ),
        Tool(
            "convert_currency",
            "Convert an amount of money between currencies.",
            _obj(
                {
                    "amount": NUM,
                    "from_currency": {"type": "string", "description": "ISO code, e.g. USD"},
                    "to_currency": {"type": "string", "description": "ISO code, e.g. EUR"},
                },
                ["amount", "from_currency", "to_currency"],
            ),
            convert_currency,
        ),
        Tool(
            "convert_length",
            "Convert a length between miles and kilometers.",
            _obj(
                {
                    "value": NUM,
                    "from_unit": {"type": "string", "enum": ["miles", "kilometers"]},
                    "to_unit": {"type": "string", "enum": ["miles", "kilometers"]},
                },
                ["value", "from_unit", "to_unit"],
            ),
            convert_length,
        ),
        Tool(
            "get_stock_price",
            "Get the latest stock price of a company by its ticker symbol.",
            _obj({"symbol": {"type": "string", "description": "Ticker symbol, e.g. MSFT"}}, ["symbol"]),
            get_stock_price,
        ),
        Tool(
            "place_stock_order",
            "Buy shares of a stock. Only when the user asks to buy.",
            _obj({"symbol": STR, "shares": NUM}, ["symbol", "shares"]),
            place_stock_order,
        ),
        Tool(
            "get_local_time",
            "Get the current local time in a city.",
            _obj({"city": STR}, ["city"]),
            get_local_time,
        ),
        Tool(
            "define_word",
            "Look up the definition of an English word.",
            _obj({"word": STR}, ["word"]),
            define_word,
        ),
        Tool(
            "get_distance",
            "Get the driving distance in kilometers between two cities.",
            _obj({"from_city": STR, "to_city": STR}, ["from_city", "to_city"]),
            get_distance,
        ),
        Tool(
            "search_products",
            "Search the shop's catalog; each result has a name, a kind and a price in USD.",
            _obj({"query": STR}, ["query"]),
            search_products,
        ),
        Tool(
            "get_flight_status",
            "Get the live status of a flight by its flight number: on time or delayed, the delay, the gate.",
            _obj({"flight_number": {"type": "string", "description": "e.g. BA117"}}, ["flight_number"]),
            get_flight_status,
        ),
        Tool(
            "book_table",
            "Book a table at a restaurant.",
            _obj(
                {"restaurant": STR, "people": {"type": "integer"}, "time": {"type": "string", "description": "HH:MM"}},
                ["restaurant", "people", "time"],
            ),
            book_table,
        ),
        Tool(
            "check_stock",
            "How many units of an item the shop has in stock.",
            _obj({"item": STR}, ["item"]),
            check_stock,
        ),
        Tool(
            "find_user",
            "Find a customer account by email address: its user id and name.",
            _obj({"email": STR}, ["email"]),
            find_user,
        ),
        Tool(
            "list_orders",
            "List the orders a customer has placed, by user id.",
            _obj({"user_id": {"type": "string", "description": "e.g. U-12"}}, ["user_id"]),
            list_orders,
        ),
        Tool(
            "get_population",
            "Get the number of people living in a city.",
            _obj({"city": STR}, ["city"]),
            get_population,
        ),
        Tool(
            "track_package",
            "Track a parcel by its tracking number: where it is and when it arrives.",
            _obj({"tracking_number": STR}, ["tracking_number"]),
            track_package,
        ),
        Tool(
            "lookup_contact",
            "Look up a person in the address book by name: full name and phone number.",
            _obj({"name": STR}, ["name"]),
            lookup_contact,
        ),
        Tool(
            "get_showtimes",
            "Today's showtimes of a movie in a city.",
            _obj({"movie": STR, "city": STR}, ["movie", "city"]),
            get_showtimes,
        ),
        Tool(
            "calculate_tip",
            "Calculate the tip for a bill.",
            _obj({"amount": NUM, "percent": NUM}, ["amount", "percent"]),
            calculate_tip,
        ),
        Tool(
            "find_airport",
            "Find the main airport of a city: its code and name.",
            _obj({"city": STR}, ["city"]),
            find_airport,
        ),
        Tool(
            "get_security_wait",
            "The current security wait at an airport, in minutes, by airport code.",
            _obj({"airport_code": {"type": "string", "description": "e.g. JFK"}}, ["airport_code"]),
            get_security_wait,
        ),
        Tool(
            "get_room_price",
            "The price of a double room for one night at a hotel, in euros.",
            _obj({"hotel": STR}, ["hotel"]),
            get_room_price,
        ),
        Tool(
            "get_recipe",
            "Look up a recipe by name: preparation and baking times, oven temperature.",
            _obj({"name": {"type": "string", "description": "e.g. sourdough"}}, ["name"]),
            get_recipe,
        ),
        Tool(
            "set_timer",
            "Start a kitchen timer for a number of minutes.",
            _obj({"minutes": NUM}, ["minutes"]),
            set_timer,
        ),
        Tool(
            "next_departures",
            "The next departures of a bus line from a stop.",
            _obj({"stop": STR, "line": {"type": "string", "description": "e.g. 12"}}, ["stop", "line"]),
            next_departures,
        ),
        Tool("list_devices", "List the user's devices with their ids.", _obj({}, []), list_devices),
        Tool(
            "get_battery",
            "The battery level of a device, by its device id.",
            _obj({"device_id": {"type": "string", "description": "e.g. d-5"}}, ["device_id"]),
            get_battery,
        ),
        Tool(
            "get_elevation",
            "The elevation of a mountain or place, in meters.",
            _obj({"place": STR}, ["place"]),
            get_elevation,
        ),
        Tool(
            "request_refund",
            "Ask for a refund of a customer's order by its order id.",
            _obj({"order_id": {"type": "string", "description": "e.g. A1234"}}, ["order_id"]),
            request_refund,
        ),
        Tool(
            "apply_discount",
            "The price after a percentage discount.",
            _obj({"price": NUM, "percent": NUM}, ["price", "percent"]),
            apply_discount,
        ),
        Tool(
            "check_room",
            "Whether a meeting room is free at a time (HH:MM, 24-hour), and who booked it if not.",
            _obj({"room": STR, "time": {"type": "string", "description": "HH:MM"}}, ["room", "time"]),
            check_room,
        ),
        Tool(
            "get_ticket",
            "The status and assignee of a support ticket.",
            _obj({"ticket_id": {"type": "string", "description": "e.g. T-100"}}, ["ticket_id"]),
            get_ticket,
        ),
        Tool(
            "split_bill",
            "Split a bill evenly: each person's share.",
            _obj({"total": NUM, "people": {"type": "integer"}}, ["total", "people"]),
            split_bill,
        ),
        Tool(
            "get_weekday",
            "The day of the week of a date.",
            _obj({"date": {"type": "string", "description": "YYYY-MM-DD"}}, ["date"]),
            get_weekday,
        ),
        Tool(
            "search_flights",
            "Flights between two cities, with their ids and prices.",
            _obj({"origin": STR, "destination": STR}, ["origin", "destination"]),
            search_flights,
        ),
        Tool(
            "book_flight",
            "Book a flight by its flight id.",
            _obj({"flight_id": STR}, ["flight_id"]),
            book_flight,
        ),
        Tool(
            "get_air_quality",
            "The air quality index (AQI) of a city now.",
            _obj({"city": STR}, ["city"]),
            get_air_quality,
        ),
        Tool(
            "set_thermostat",
            "Set the living room thermostat's mode.",
            _obj({"mode": {"type": "string", "enum": ["eco", "comfort", "off"]}}, ["mode"]),
            set_thermostat,
        ),
        Tool(
            "get_parcel_fee",
            "The postage for a parcel to a country, in euros.",
            _obj({"weight_kg": NUM, "country": STR}, ["weight_kg", "country"]),
            get_parcel_fee,
        ),
        Tool("get_calories", "Calories in one serving of a food.", _obj({"food": STR}, ["food"]), get_calories),
        Tool(
            "translate_word",
            "Translate a word with the dictionary.",
            _obj({"word": STR, "language": {"type": "string", "description": "Target language"}}, ["word", "language"]),
            translate_word,
        ),
        Tool("find_book", "Find a book by its title: author and ISBN.", _obj({"title": STR}, ["title"]), find_book),
        Tool(
            "library_availability",
            "How many copies of a book (by ISBN) the library has on the shelf.",
            _obj({"isbn": STR}, ["isbn"]),
            library_availability,
        ),
        Tool(
            "get_opening_hours",
            "Today's opening hours of a museum.",
            _obj({"museum": STR}, ["museum"]),
            get_opening_hours,
        ),
        Tool(
            "set_alarm",
            "Set an alarm on the user's phone.",
            _obj({"time": {"type": "string", "description": "HH:MM, 24-hour"}}, ["time"]),
            set_alarm,
        ),
        Tool(
            "renew_loan",
            "Renew a borrowed library book by its barcode.",
            _obj({"barcode": STR}, ["barcode"]),
            renew_loan,
        ),
        Tool(
            "days_between",
            "The number of days from one date to another (YYYY-MM-DD).",
            _obj({"start": STR, "end": STR}, ["start", "end"]),
            days_between,
        ),
        Tool(
            "get_share_price",
            "The latest share price of a company, by its stock symbol.",
            _obj({"symbol": {"type": "string", "description": "e.g. MSFT"}}, ["symbol"]),
            get_share_price,
        ),
        Tool(
            "convert_units",
            "Convert a quantity from one unit to another (mi, km, kg, lb).",
            _obj({"value": NUM, "from_unit": STR, "to_unit": STR}, ["value", "from_unit", "to_unit"]),
            convert_units,
        ),
        Tool(
            "get_train_status",
            "Whether a train runs on time today, by its train number.",
            _obj({"train_number": STR}, ["train_number"]),
            get_train_status,
        ),
        Tool(
            "find_restaurant",
            "Find a restaurant by cuisine in a city: its name and id.",
            _obj({"cuisine": STR, "city": STR}, ["cuisine", "city"]),
            find_restaurant,
        ),
        Tool(
            "reserve_table",
            "Book a table at a restaurant by its id.",
            _obj(
                {
                    "restaurant_id": STR,
                    "time": {"type": "string", "description": "HH:MM"},
                    "people": {"type": "integer"},
                },
                ["restaurant_id", "time", "people"],
            ),
            reserve_table,
        ),
        Tool(
            "get_exchange_rate",
            "The exchange rate between two currencies (ISO codes).",
            _obj({"from_currency": STR, "to_currency": STR}, ["from_currency", "to_currency"]),
            get_exchange_rate,
        ),
        Tool(
            "find_events",
            "Concerts, fairs and other public events in a city this weekend.",
            _obj({"city": STR}, ["city"]),
            find_events,
        ),
        Tool(
            "send_sms",
            "Send a text message to a phone number.",
            _obj({"to": STR, "message": STR}, ["to", "message"]),
            send_sms,
        ),
        Tool(
            "calculate_bmi",
            "Body mass index from weight and height.",
            _obj({"weight_kg": NUM, "height_m": NUM}, ["weight_kg", "height_m"]),
            calculate_bmi,
        ),
        Tool(
            "translate_text",
            "Translate a short text into another language.",
            _obj({"text": STR, "target_language": STR}, ["text", "target_language"]),
            translate_text,
        ),
        Tool(
            "find_account",
            "Find a customer's bank account by the holder's name: the account id.",
            _obj({"name": STR}, ["name"]),
            find_account,
        ),
        Tool(
            "get_balance",
            "The balance of a bank account, by its account id.",
            _obj({"account_id": STR}, ["account_id"]),
            get_balance,
        ),
        Tool(
            "get_hotel_amenities",
            "The amenities a hotel offers.",
            _obj({"hotel": STR}, ["hotel"]),
            get_hotel_amenities,
        ),
        Tool(
            "get_ticket_price",
            "The adult entry ticket price of a museum or attraction.",
            _obj({"attraction": STR}, ["attraction"]),
            get_ticket_price,
        ),
        Tool(
            "get_movie_details",
            "Details of a film: director, year and runtime.",
            _obj({"title": STR}, ["title"]),
            get_movie_details,
        ),
        Tool(
            "get_uv_index",
            "Today's UV index in a city.",
            _obj({"city": STR}, ["city"]),
            get_uv_index,
        ),
        Tool(
            "get_pollen_count",
            "Today's pollen level in a city.",
            _obj({"city": STR}, ["city"]),
            get_pollen_count,
        ),
        Tool(
            "get_flight_price",
            "The cheapest economy fare between two cities.",
            _obj({"origin": STR, "destination": STR}, ["origin", "destination"]),
            get_flight_price,
        ),
        Tool(
            "check_visa",
            "Whether a traveller of a nationality needs a visa to visit a country.",
            _obj({"nationality": STR, "country": STR}, ["nationality", "country"]),
            check_visa,
        ),
        Tool("find_synonyms", "Synonyms of an English word.", _obj({"word": STR}, ["word"]), find_synonyms),
        Tool(
            "get_employee",
            "An employee's record in the company directory: team and manager.",
            _obj({"name": STR}, ["name"]),
            get_employee,
        ),
        Tool(
            "get_phone_number",
            "A person's work phone number.",
            _obj({"person": STR}, ["person"]),
            get_phone_number,
        ),
        Tool(
            "create_reminder",
            "Create a reminder on the user's phone.",
            _obj({"text": STR, "time": {"type": "string", "description": "HH:MM, 24-hour"}}, ["text", "time"]),
            create_reminder,
        ),
        Tool(
            "get_nutrition",
            "Nutrition facts of a food.",
            _obj({"food": STR}, ["food"]),
            get_nutrition,
        ),
        Tool(
            "get_country_area",
            "The land area of a country in square kilometres.",
            _obj({"country": STR}, ["country"]),
            get_country_area,
        ),
        Tool(
            "get_stock_level",
            "How many units of a product the shop has in stock.",
            _obj({"product": STR}, ["product"]),
            get_stock_level,
        ),
        Tool(
            "get_bus_times",
            "The next departures from a bus stop.",
            _obj({"stop": STR}, ["stop"]),
            get_bus_times,
        ),
        Tool("get_ingredients", "The ingredients of a dish's recipe.", _obj({"dish": STR}, ["dish"]), get_ingredients),
        Tool(
            "find_order",
            "Find a customer's latest order by their email address: the order id and status.",
            _obj({"email": STR}, ["email"]),
            find_order,
        ),
        Tool(
            "get_delivery_date",
            "The estimated delivery date of an order, by its order id.",
            _obj({"order_id": STR}, ["order_id"]),
            get_delivery_date,
        ),
        Tool("get_sunrise", "Tomorrow's sunrise time in a city.", _obj({"city": STR}, ["city"]), get_sunrise),
        Tool(
            "add_calendar_event",
            "Add an event to the user's calendar.",
            _obj(
                {"title": STR, "date": {"type": "string", "description": "YYYY-MM-DD"}, "time": {"type": "string"}},
                ["title", "date"],
            ),
            add_calendar_event,
        ),
        Tool(
            "search_jobs",
            "Search open job listings by job title and city.",
            _obj({"title": STR, "city": STR}, ["title"]),
            search_jobs,
        ),
        Tool(
            "get_fuel_price",
            "Today's average fuel price in a city, per litre.",
            _obj({"city": STR, "fuel": {"type": "string", "enum": ["diesel", "petrol"]}}, ["city", "fuel"]),
            get_fuel_price,
        ),
        Tool(
            "check_domain",
            "Whether an internet domain name is available to register.",
            _obj({"domain": STR}, ["domain"]),
            check_domain,
        ),
        Tool("find_student", "Find a student's id by their first name.", _obj({"name": STR}, ["name"]), find_student),
        Tool(
            "get_grades",
            "A student's latest exam grades (0-100) and the pass mark, by student id.",
            _obj({"student_id": STR}, ["student_id"]),
            get_grades,
        ),
        Tool(
            "convert_time_zone",
            "Convert a clock time in one city to the time in another city.",
            _obj(
                {"time": {"type": "string", "description": "HH:MM, 24-hour"}, "from_city": STR, "to_city": STR},
                ["time", "from_city", "to_city"],
            ),
            convert_time_zone,
        ),
        Tool(
            "get_tide_times",
            "Today's high and low tide times at a coastal place.",
            _obj({"place": STR}, ["place"]),
            get_tide_times,
        ),
        Tool(
            "order_pizza",
            "Order a pizza for delivery.",
            _obj(
                {
                    "size": {"type": "string", "enum": ["small", "medium", "large"]},
                    "toppings": {"type": "array", "items": STR},
                },
                ["size", "toppings"],
            ),
            order_pizza,
        ),
        Tool(
            "set_light",
            "Set the brightness of the lights in a room of the user's home.",
            _obj(
                {"room": STR, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, ["room", "brightness"]
            ),
            set_light,
        ),
        Tool(
            "get_invoice",
            "An invoice's amount and status, by invoice id.",
            _obj({"invoice_id": STR}, ["invoice_id"]),
            get_invoice,
        ),
        Tool("pay_invoice", "Pay an invoice, by invoice id.", _obj({"invoice_id": STR}, ["invoice_id"]), pay_invoice),
        Tool(
            "get_last_match",
            "The result of a football team's last match.",
            _obj({"team": STR}, ["team"]),
            get_last_match,
        ),
        Tool(
            "search_recipes",
            "Find recipes that use an ingredient.",
            _obj({"ingredient": STR}, ["ingredient"]),
            search_recipes,
        ),
        Tool(
            "get_pull_request",
            "A pull request's state, whether it was merged, and its approvals, by number.",
            _obj({"number": {"type": "integer"}}, ["number"]),
            get_pull_request,
        ),
        Tool(
            "convert_cooking",
            "Convert a cooking measure of an ingredient between units.",
            _obj(
                {
                    "amount": NUM,
                    "from_unit": {"type": "string", "enum": ["cups", "tablespoons", "teaspoons"]},
                    "to_unit": {"type": "string", "enum": ["grams", "millilitres"]},
                    "ingredient": STR,
                },
                ["amount", "from_unit", "to_unit", "ingredient"],
            ),
            convert_cooking,
        ),
        Tool(
            "get_device_batteries",
            "The battery level of each of the user's devices.",
            _obj({}, []),
            get_device_batteries,
        ),
        Tool(
            "set_device_power",
            "Switch one of the user's smart-home devices on or off.",
            _obj({"device": STR, "on": {"type": "boolean"}}, ["device", "on"]),
            set_device_power,
        ),
        Tool(
            "get_event_attendees",
            "How many people are attending an event, and how many declined.",
            _obj({"event": STR}, ["event"]),
            get_event_attendees,
        ),
        Tool(
            "create_contact",
            "Save a new contact in the user's address book.",
            _obj({"contact": _obj({"name": STR, "phone": STR}, ["name", "phone"])}, ["contact"]),
            create_contact,
        ),
        Tool(
            "calculate_vat",
            "The VAT on an amount at a rate in percent.",
            _obj({"amount": NUM, "rate": NUM}, ["amount", "rate"]),
            calculate_vat,
        ),
        Tool("get_humidity", "The current relative humidity in a city.", _obj({"city": STR}, ["city"]), get_humidity),
        Tool(
            "distance_between",
            "The road distance between two cities, in kilometres.",
            _obj({"from_city": STR, "to_city": STR}, ["from_city", "to_city"]),
            distance_between,
        ),
    )
}

# ---- checks: each returns the problems it finds (none: the check holds) -------------------------

Check = Callable[[str, Sequence[Call]], list[str]]


def _digits_joined(text: str) -> str:
    """``7,006,661`` / ``7 006 661`` / ``7'006'661`` as ``7006661`` (separators between digit groups)."""
    return re.sub(r"(?<=\d)[,\u202f\u00a0' ](?=\d{3}\b)", "", text)


def number_in(text: str, number: str) -> bool:
    """``number`` appears as a number: ``39`` matches 39 and 39.2, not 390; ``42.1`` matches 42.16."""
    tail = r"\d*" if "." in number else r"(?:\.\d+)?"
    return re.search(rf"(?<![\d.]){re.escape(number)}{tail}(?!\d)", _digits_joined(text)) is not None


def says_number(*alternatives: str) -> Check:
    def check(answer: str, calls: Sequence[Call]) -> list[str]:
        if any(number_in(answer, number) for number in alternatives):
            return []
        return [f"answer lacks the number {' or '.join(alternatives)}"]

    return check


def says_word(*alternatives: str) -> Check:
    def check(answer: str, calls: Sequence[Call]) -> list[str]:
        folded = answer.casefold()
        if any(word in folded for word in alternatives):
            return []
        return [f"answer lacks any of {', '.join(alternatives)}"]

    return check


_NEGATION = re.compile(r"\b(?:not|never|unable|cannot|failed|fail|error|sorry)\b|n't\b", re.I)


def not_negated(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer does not say the thing failed ("The appointment was not added to the calendar.")."""
    found = _NEGATION.search(answer)
    return [f"answer says it did not work ({found.group()!r})"] if found else []


def prose(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer is not a bare JSON value (``{"kilometers": 42.16}``: the tool result handed on)."""
    try:
        json.loads(answer)
    except ValueError:
        return []
    return ["answer is a bare JSON value, not a sentence"]


def _arg_text(call: Call) -> str:
    return json.dumps(call.args, ensure_ascii=False).casefold()


def called(name: str, *mentions: str) -> Check:
    """A call to ``name`` was executed whose arguments mention each of ``mentions`` (case aside)."""

    def check(answer: str, calls: Sequence[Call]) -> list[str]:
        for call in calls:
            if call.name == name and all(m.casefold() in _arg_text(call) for m in mentions):
                return []
        wanted = f"{name}({', '.join(mentions)})" if mentions else name
        return [f"no {wanted} call executed"]

    return check


def not_called(*names: str) -> Check:
    def check(answer: str, calls: Sequence[Call]) -> list[str]:
        bad = sorted({call.name for call in calls if call.name in names})
        return [f"unrequested {name} executed" for name in bad]

    return check


def no_calls(answer: str, calls: Sequence[Call]) -> list[str]:
    return [f"a tool was called for a question that needs none: {calls[0]}"] if calls else []


_REFUSED = re.compile(
    r"(?<!not )(?:fully booked|booked up)|\b(?:21:30|9:30)\b|could ?n[o']t|unable|unavailable|not available|no table"
    r"|not (?:been |be )?booked|was not possible",
    re.IGNORECASE,
)


def booking_refused(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the table could not be booked (or offers 21:30); "was not fully booked" says the opposite."""
    if re.search(r"not fully booked", answer, re.IGNORECASE) or not _REFUSED.search(answer):
        return ["answer does not say the booking failed (fully booked at 20:00, free at 21:30)"]
    return []


def event_call(answer: str, calls: Sequence[Call]) -> list[str]:
    """``add_event`` with the date, the time (09:30 or 9:30) and a title naming the dentist."""
    for call in calls:
        if call.name != "add_event":
            continue
        text = _arg_text(call)
        title = str(call.args.get("title", "")).casefold()
        if "2025-03-14" in text and re.search(r"\b0?9:30", text) and "dentist" in title:
            return []
    return ["no add_event(title~dentist, date=2025-03-14, time=09:30) executed"]


_REFUND_REFUSED = re.compile(
    r"could ?n[o']t|can ?no?t|unable|not (?:be |been |possible|eligible|refunded)|no refund|n't (?:be )?refund|denied"
    r"|declined"
    r"|refused|window (?:has |had )?(?:closed|expired|passed)|(?:closed|expired|passed)",
    re.IGNORECASE,
)


def refund_refused(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the refund was not made (the 30-day window closed)."""
    if _REFUND_REFUSED.search(answer) is None or re.search(r"\b(?:has|have|was) been refunded\b", answer, re.I):
        return ["answer does not say the refund was refused (the window closed on 2026-10-01)"]
    return []


_TAKEN = re.compile(r"\bnot (?:free|available)|\b(?:booked|taken|occupied|reserved|unavailable)\b|sales", re.I)


def room_taken(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the room is not free (booked by the Sales team); "is free" / "not booked" say the opposite."""
    if _TAKEN.search(answer) is None or re.search(
        r"\b(?:is|it's) (?:free|available)\b|not (?:booked|taken)", answer, re.I
    ):
        return ["answer does not say the room is taken (booked by the Sales team at 15:00)"]
    return []


def book_on_shelf(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says Dune is there (2 copies): the number, or a yes ("The library has Dune on the shelf."),
    not a no ("doesn't have", "not available")."""
    said = number_in(answer, "2") or re.search(r"\b(?:two|yes|has|have|available)\b", answer, re.I)
    if not said or re.search(r"\bno\b|not|n't|unavailable", answer, re.I):
        return ["answer does not say the book is on the shelf (2 copies)"]
    return []


_RENEWAL_REFUSED = re.compile(
    r"\breserved\b|(?:not|n't|unable to|could ?n[o']t|can ?no?t) (?:be |been )?renew", re.IGNORECASE
)


def renewal_refused(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the book was not renewed (another reader reserved it); "has been renewed" says the opposite."""
    if _RENEWAL_REFUSED.search(answer) is None or re.search(r"\b(?:has|have|was) been renewed\b", answer, re.I):
        return ["answer does not say the renewal was refused (another reader reserved the book)"]
    return []


_LATE = re.compile(
    r"\b(?:late|delay(?:ed)?|behind schedule)\b|\bnot (?:currently |running )?on time\b|n't on time", re.I
)
_ON_TIME = re.compile(r"(?<!not )(?<!n't )\b(?:is|runs|running) on time\b", re.I)


def train_late(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the train is late: its 25 minutes, or in words ("No, it is not on time."); not that it runs
    on time. (Written after the first run, whose check wanted the number: "not on time" answers the question.)"""
    if (number_in(answer, "25") or _LATE.search(answer)) and not _ON_TIME.search(answer):
        return []
    return ["answer does not say the train is late (25 minutes)"]


_NONE_FOUND = re.compile(r"\b(?:no|none|nothing|not any|aren't any|are not any|isn't anything|zero)\b", re.IGNORECASE)


def says_none_found(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the tool found nothing (an empty list), instead of making events up."""
    return [] if _NONE_FOUND.search(answer) else ["answer does not say that nothing was found"]


_PARKING_DENIED = re.compile(
    r"\bno (?:on-site |onsite )?parking\b|(?:\bnot|n't)\b[^.]*\bparking\b|\bparking\b[^.]*(?:\bnot|n't)\b"
    r"|\bdoes not (?:have|offer|list|include)\b|\bdoesn't (?:have|offer|list|include)\b",
    re.IGNORECASE,
)


def no_parking(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the hotel lists no parking (its amenities are wifi, a pool, a gym and a restaurant)."""
    return [] if _PARKING_DENIED.search(answer) else ["answer does not say the hotel has no parking"]


def length_of_inception(answer: str, calls: Sequence[Call]) -> list[str]:
    """148 minutes, or the same as hours and minutes (2 h 28 min)."""
    if number_in(answer, "148") or re.search(
        r"\b2\s*(?:h|hours?)(?![a-z])\D{0,12}28\s*(?:m|min|minutes?)?\b", answer, re.IGNORECASE
    ):
        return []
    return ["answer lacks the runtime (148 minutes)"]


def no_visa_needed(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says no visa is needed (for up to 90 days); not that one is."""
    says_no = re.search(
        r"\bno visa\b|(?:\bnot|n't) (?:need|required?)\b|\bnot required\b|without a visa|visa[- ]free|^\W*no\b",
        answer,
        re.IGNORECASE,
    )
    says_yes = re.search(r"\b(?:do|does|will) need a visa\b|\bvisa is required\b|\byes\b", answer, re.IGNORECASE)
    return [] if says_no and not says_yes else ["answer does not say that no visa is needed"]


def canada_is_larger(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says Canada is the larger of the two (9,984,670 km² against 9,596,961)."""
    larger = r"(?:bigger|larger|greater|more land)"
    if re.search(rf"canada\b[^.]*\b{larger}|\b{larger}\b[^.]*\bcanada", answer, re.IGNORECASE) and not re.search(
        rf"china\b[^.]*\bis\b[^.]*\b{larger}\b[^.]*\bcanada", answer, re.IGNORECASE
    ):
        return []
    return ["answer does not say that Canada is larger"]


_OUT_OF_STOCK = re.compile(
    r"out of stock|(?:not|n't)\b[^.]{0,20}\b(?:in stock|available)|unavailable|sold out|\bno (?:units|stock)\b"
    r"|\b(?:0|zero) (?:units|in stock)|restock|december 8|2026-12-08",
    re.IGNORECASE,
)


def kettle_out_of_stock(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the kettle is not in stock (0 units, back on 2026-12-08); not that it is."""
    if _OUT_OF_STOCK.search(answer) and not re.search(r"(?<!not )\bis (?:currently )?in stock\b", answer, re.I):
        return []
    return ["answer does not say the kettle is out of stock"]


_NOT_FREE = re.compile(
    r"\b(?:taken|registered|unavailable|not available|isn't available|is not free|already (?:owned|in use))\b", re.I
)


def domain_taken(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says the domain is taken (registered since 2024); not that it is available."""
    if _NOT_FREE.search(answer) and not re.search(r"(?<!not )(?<!n't )\bis (?:still )?available\b", answer, re.I):
        return []
    return ["answer does not say the domain is taken"]


def mia_failed(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says Mia did not pass maths (38 against a pass mark of 50)."""
    failed = re.search(r"\b(?:did not|didn't|has not|hasn't|not) pass|\bfail(?:ed)?\b|\bno\b|below", answer, re.I)
    if failed and not re.search(r"(?<!not )(?<!n't )\b(?:passed|did pass)\b", answer, re.I):
        return []
    return ["answer does not say Mia failed maths (38, pass mark 50)"]


def benfica_lost(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says Benfica did not win (they lost 1-2 at home to Porto); not that they won."""
    lost = re.search(r"\b(?:lost|lose|defeat(?:ed)?|beaten|beat)\b|did not win|didn't win|\bno\b", answer, re.I)
    if lost and not re.search(r"benfica (?:won|win|beat)", answer, re.I):
        return []
    return ["answer does not say Benfica lost (1-2 to Porto)"]


def not_merged(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says #482 is not merged (still open, one approval); not that it was merged."""
    if re.search(
        r"\bnot (?:yet |been )?merged|n't (?:been )?merged|\bopen\b|\bno\b|unmerged", answer, re.I
    ) and not re.search(r"(?<!not )(?<!n't )\b(?:has been|was|is) merged\b", answer, re.I):
        return []
    return ["answer does not say the pull request is not merged (open, 1 approval)"]


def prague_is_closer(answer: str, calls: Sequence[Call]) -> list[str]:
    """The answer says Prague is the closer (350 km against Vienna's 680)."""
    closer = r"(?:closer|nearer|shorter|less far)"
    if re.search(rf"prague\b[^.]*\b{closer}|\b{closer}\b[^.]*\bprague", answer, re.I) and not re.search(
        rf"vienna\b[^.]*\bis\b[^.]*\b{closer}", answer, re.I
    ):
        return []
    return ["answer does not say Prague is closer to Berlin"]


@dataclass(frozen=True, slots=True)
class Task:
    """A question, the tools offered, and the checks its loop must pass."""

    name: str
    question: str
    tools: tuple[str, ...]
    checks: tuple[Check, ...]
    needs_tool: bool = True
    summary: str = ""

    def offered(self) -> list[Tool]:
        return [TOOLS[name] for name in self.tools]

    def judge(self, answer: str, calls: Sequence[Call]) -> list[str]:
        """The problems with this loop's answer and executed calls (none: correct); every task's answer
        must also be prose, not a tool result passed on as it came."""
        return [problem for check in (*self.checks, prose) for problem in check(answer, calls)]


TASKS: tuple[Task, ...] = (
    Task(
        "weather_f",
        "What is the temperature in Oslo right now, in Fahrenheit?",
        ("get_weather", "convert_temperature"),
        (called("get_weather", "oslo"), says_number("39")),
        summary="weather, then a unit conversion (4 C = 39.2 F)",
    ),
    Task(
        "order_status",
        "Where is my order A1234? Has it shipped yet?",
        ("get_order_status", "cancel_order"),
        (called("get_order_status", "a1234"), not_called("cancel_order"), says_word("shipped", "dhl", "on its way")),
        summary="an order lookup; cancel_order must not run",
    ),
    Task(
        "calendar",
        "Add a dentist appointment to my calendar on 2025-03-14 at 09:30.",
        ("add_event", "list_events"),
        (event_call, says_word("dentist", "added", "scheduled", "created", "booked", "calendar"), not_negated),
        summary="add_event with title, date and time",
    ),
    Task(
        "calculator",
        "What is 1234 * 5678 + 9? Use the calculator.",
        ("calculator", "convert_currency"),
        (called("calculator"), says_number("7006661")),
        summary="arithmetic through the calculator (7006661)",
    ),
    Task(
        "two_step",
        "What's the weather like in the city where my colleague Alice lives?",
        ("get_colleague", "get_weather"),
        (called("get_colleague", "alice"), called("get_weather", "lisbon"), says_number("21")),
        summary="the second call needs the first result (Alice -> Lisbon -> 21 C)",
    ),
    Task(
        "two_cities",
        "What's the weather right now in Paris and in Tokyo?",
        ("get_weather", "convert_temperature"),
        (called("get_weather", "paris"), called("get_weather", "tokyo"), says_number("18"), says_number("25")),
        summary="two independent calls (18 C and 25 C)",
    ),
    Task(
        "currency",
        "How much is 250 US dollars in euros?",
        ("convert_currency", "calculator"),
        (called("convert_currency", "250"), says_number("230")),
        summary="a currency conversion (230 EUR)",
    ),
    Task(
        "length",
        "How many kilometers is a marathon of 26.2 miles?",
        ("convert_length", "calculator"),
        (called("convert_length"), says_number("42.1", "42.2")),
        summary="a length conversion (42.16 km)",
    ),
    Task(
        "no_tool",
        "Hi! What is the capital of France?",
        ("get_weather", "calculator"),
        (no_calls, says_word("paris")),
        needs_tool=False,
        summary="a general question: no tool, a direct answer",
    ),
)
# Written after ground_arguments was built on TASKS and never tuned on: a check that what helps generalises
# (a value the model must derive from what it knows, a percentage, a reverse conversion, two facts of one
# result, a thank-you that needs no tool). Run them with --tasks held_out or by name.
HELD_OUT: tuple[Task, ...] = (
    Task(
        "capital_weather",
        "What's the weather like in the capital of Japan?",
        ("get_weather", "convert_temperature"),
        (called("get_weather", "tokyo"), says_number("25")),
        summary="a city the model must know (Tokyo), then its weather (25 C)",
    ),
    Task(
        "order_eta",
        "Has order B5678 shipped? If not, when is it expected?",
        ("get_order_status", "cancel_order"),
        (called("get_order_status", "b5678"), not_called("cancel_order"), says_word("2025-03-21", "march 21", "21")),
        summary="an order lookup answered with its expected date",
    ),
    Task(
        "percent",
        "What is 15% of 240? Please use the calculator.",
        ("calculator", "convert_currency"),
        (called("calculator"), says_number("36")),
        summary="a percentage through the calculator (36)",
    ),
    Task(
        "euros_to_dollars",
        "I have 100 euros. How many US dollars is that?",
        ("convert_currency", "calculator"),
        (called("convert_currency", "100"), says_number("109")),
        summary="the reverse currency conversion (109 USD)",
    ),
    Task(
        "colleague_facts",
        "Which city does my colleague Alice live in, and which team is she on?",
        ("get_colleague", "get_weather"),
        (called("get_colleague", "alice"), not_called("get_weather"), says_word("lisbon"), says_word("design")),
        summary="two facts of one result; the weather tool must not run",
    ),
    Task(
        "km_to_miles",
        "Convert 10 kilometers to miles.",
        ("convert_length", "calculator"),
        (called("convert_length", "10"), says_number("6.21", "6.2")),
        summary="a length conversion the other way (6.21 miles)",
    ),
    Task(
        "thanks",
        "Thanks, that's all for today!",
        ("get_weather", "get_order_status"),
        (no_calls, prose),
        needs_tool=False,
        summary="a thank-you: no tool",
    ),
)
# Written after every feature above and never run while tuning: new tools, new questions (``--tasks fresh``).
FRESH: tuple[Task, ...] = (
    Task(
        "stock_price",
        "What's Apple's stock price right now?",
        ("get_stock_price", "place_stock_order"),
        (called("get_stock_price"), not_called("place_stock_order"), says_number("231.5", "231.50")),
        summary="a ticker the model must know (AAPL); buying must not happen",
    ),
    Task(
        "sydney_time",
        "What time is it in Sydney?",
        ("get_local_time", "get_weather"),
        (called("get_local_time", "sydney"), not_called("get_weather"), says_word("00:05", "12:05", "0:05")),
        summary="a local time (00:05)",
    ),
    Task(
        "define",
        "What does the word 'ephemeral' mean?",
        ("define_word", "calculator"),
        (called("define_word", "ephemeral"), says_word("short")),
        summary="a definition from a dictionary tool",
    ),
    Task(
        "distance_miles",
        "How far is it from Paris to Berlin, in miles?",
        ("get_distance", "convert_length"),
        (called("get_distance", "paris", "berlin"), says_number("546", "545.6", "545.5", "545")),
        summary="a distance in km, then in miles (545.6)",
    ),
    Task(
        "unknown_order",
        "What's the status of my order Z9999?",
        ("get_order_status", "cancel_order"),
        (
            called("get_order_status", "z9999"),
            not_called("cancel_order"),
            says_word("not", "unknown", "unable", "couldn"),
        ),
        summary="an order the shop does not know: the answer says so",
    ),
    Task(
        "headphones",
        "Do you sell wireless headphones for under $100?",
        ("search_products", "place_stock_order"),
        (called("search_products"), says_word("soundlite")),
        summary="a catalog search answered with the one product that fits",
    ),
    Task(
        "two_clocks",
        "What time is it in Berlin and in New York?",
        ("get_local_time", "get_weather"),
        (
            called("get_local_time", "berlin"),
            called("get_local_time", "new york"),
            says_word("14:05", "2:05"),
            says_word("08:05", "8:05"),
        ),
        summary="two independent lookups",
    ),
    Task(
        "haiku",
        "Write a haiku about autumn leaves.",
        ("get_weather", "define_word"),
        (no_calls, prose),
        needs_tool=False,
        summary="a poem: no tool",
    ),
)
# Written 2026-11-28 before any run on them, with six new tools: a delay, a booking that fails, a stock
# of zero, two lookups in a chain, a sum to split, two cities' figures, a translation that needs no tool
# (``--tasks unseen``).
UNSEEN: tuple[Task, ...] = (
    Task(
        "flight_delay",
        "Is flight LH400 on time?",
        ("get_flight_status", "book_table"),
        (called("get_flight_status", "400"), not_called("book_table"), says_word("delay", "late", "35")),
        summary="a flight that is 35 minutes late",
    ),
    Task(
        "table_full",
        "Book a table for 2 at Luigi's tonight at 20:00.",
        ("book_table", "get_flight_status"),
        (called("book_table", "luigi"), booking_refused),
        summary="a booking the restaurant refuses: the answer says so",
    ),
    Task(
        "mug_stock",
        "Is the blue mug in stock?",
        ("check_stock", "search_products"),
        (
            called("check_stock", "blue"),
            says_word("out of stock", "not in stock", "sold out", "0 ", "zero", "none", "no blue", "not available"),
        ),
        summary="an item with none left",
    ),
    Task(
        "user_orders",
        "How many orders has bob@example.com placed?",
        ("find_user", "list_orders"),
        (called("find_user", "bob@example.com"), called("list_orders", "u-77"), says_number("3")),
        summary="the second call needs the first result's user id (3 orders)",
    ),
    Task(
        "split_bill",
        "Split a bill of 86.40 dollars evenly between 3 people. Use the calculator.",
        ("calculator", "convert_currency"),
        (called("calculator"), not_called("convert_currency"), says_number("28.8", "28.80")),
        summary="a division through the calculator (28.80)",
    ),
    Task(
        "two_populations",
        "How many people live in Lisbon and in Porto?",
        ("get_population", "get_weather"),
        (
            called("get_population", "lisbon"),
            called("get_population", "porto"),
            says_number("545000", "545"),
            says_number("232000", "232"),
        ),
        summary="two independent lookups of the same tool",
    ),
    Task(
        "on_time",
        "My flight is BA117. Which gate does it leave from?",
        ("get_flight_status", "get_weather"),
        (called("get_flight_status", "117"), not_called("get_weather"), says_word("a7")),
        summary="one field of a result (gate A7)",
    ),
    Task(
        "translate",
        "How do you say 'thank you' in Spanish?",
        ("define_word", "get_weather"),
        (no_calls, says_word("gracias")),
        needs_tool=False,
        summary="a translation: no tool",
    ),
)
# Written 2026-11-28 after the tool-talk re-ask, before any run on them (``--tasks fourth``): a parcel, a phone
# number, showtimes, a tip, an airport code before its wait, two hotels' prices, a person the address book
# lacks, a square root that needs no tool.
FOURTH: tuple[Task, ...] = (
    Task(
        "parcel",
        "Where is my parcel 1Z999? When will it arrive?",
        ("track_package", "cancel_order"),
        (called("track_package", "1z999"), not_called("cancel_order"), says_word("friday")),
        summary="a parcel in transit, arriving Friday",
    ),
    Task(
        "phone",
        "What's Maria's phone number?",
        ("lookup_contact", "get_weather"),
        (called("lookup_contact", "maria"), says_number("600 123 456", "600123456", "34600123456")),
        summary="a phone number from the address book",
    ),
    Task(
        "showtimes",
        "When is Dune playing in Madrid today?",
        ("get_showtimes", "get_weather"),
        (called("get_showtimes", "dune", "madrid"), says_word("18:30", "6:30", "21:00", "9:00")),
        summary="two showtimes of one movie",
    ),
    Task(
        "tip",
        "How much should I tip on a 60 dollar bill at 15 percent?",
        ("calculate_tip", "convert_currency"),
        (called("calculate_tip", "60", "15"), not_called("convert_currency"), says_number("9")),
        summary="a tip through the tool ($9)",
    ),
    Task(
        "airport_wait",
        "How long is the security wait at the airport in Lisbon right now?",
        ("find_airport", "get_security_wait"),
        (called("find_airport", "lisbon"), called("get_security_wait", "lis"), says_number("25")),
        summary="the wait needs the airport's code first (LIS, 25 minutes)",
    ),
    Task(
        "two_hotels",
        "How much is a room at the Ritz and at the Savoy?",
        ("get_room_price", "get_weather"),
        (
            called("get_room_price", "ritz"),
            called("get_room_price", "savoy"),
            says_number("450"),
            says_number("380"),
        ),
        summary="two independent lookups of one tool",
    ),
    Task(
        "unknown_contact",
        "What's Zoe's phone number?",
        ("lookup_contact", "get_weather"),
        (called("lookup_contact", "zoe"), says_word("not", "no ", "unknown", "couldn", "unable", "isn't")),
        summary="a person the address book does not have: the answer says so",
    ),
    Task(
        "square_root",
        "What is the square root of 81?",
        ("lookup_contact", "get_showtimes"),
        (no_calls, says_number("9")),
        needs_tool=False,
        summary="arithmetic no offered tool does: a direct answer",
    ),
)
# Written 2026-11-28 (session of stop 44) before any run on them (``--tasks fifth``), with nine new tools: a
# baking time with a timer not to set, a bus's next departure, a device id to look up before its battery, a
# capital no offered tool knows, two mountains' heights, a refund the shop refuses, a discount to compute,
# a meeting room that is taken.
FIFTH: tuple[Task, ...] = (
    Task(
        "bake_time",
        "How long do I bake the sourdough loaf?",
        ("get_recipe", "set_timer"),
        (called("get_recipe", "sourdough"), not_called("set_timer"), says_number("45")),
        summary="one field of a recipe (45 minutes), no timer",
    ),
    Task(
        "next_bus",
        "When does the next number 12 bus leave from Central Station?",
        ("next_departures", "get_weather"),
        (called("next_departures", "12"), not_called("get_weather"), says_word("14:05", "2:05")),
        summary="the first of two departures (14:05)",
    ),
    Task(
        "laptop_battery",
        "What's the battery level of my laptop?",
        ("list_devices", "get_battery"),
        (called("get_battery", "d-1"), says_number("64")),
        summary="the laptop's id (d-1) from the device list before its battery (64%)",
    ),
    Task(
        "capital",
        "What is the capital of Japan?",
        ("get_battery", "next_departures"),
        (no_calls, says_word("tokyo")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
    Task(
        "two_mountains",
        "How high are Mont Blanc and the Matterhorn?",
        ("get_elevation", "get_weather"),
        (
            called("get_elevation", "blanc"),
            called("get_elevation", "matterhorn"),
            says_number("4806", "4,806", "4.806"),
            says_number("4478", "4,478", "4.478"),
        ),
        summary="two independent lookups of one tool",
    ),
    Task(
        "refund_refused",
        "Please refund my order B-552.",
        ("request_refund", "cancel_order"),
        (called("request_refund", "552"), not_called("cancel_order"), refund_refused),
        summary="a refund the shop refuses (the window closed): the answer says so",
    ),
    Task(
        "discount",
        "What does a 240 euro jacket cost with 15 percent off?",
        ("apply_discount", "convert_currency"),
        (called("apply_discount", "240", "15"), not_called("convert_currency"), says_number("204")),
        summary="a price through the tool (204)",
    ),
    Task(
        "room_taken",
        "Is meeting room Orion free at 3 pm?",
        ("check_room", "add_event"),
        (called("check_room", "orion"), not_called("add_event"), room_taken),
        summary="a room that is booked (by the Sales team): the answer says so",
    ),
)

# Written 2026-11-28 (session of stop 45) before any run on them (``--tasks sixth``), with eight new tools: a
# support ticket's status, a bill to split, a date's weekday, the cheapest flight to find and then book, a
# question no tool answers, two cities' air quality, a thermostat mode from an enum, a parcel's postage.
SIXTH: tuple[Task, ...] = (
    Task(
        "ticket_status",
        "What's the status of support ticket T-104?",
        ("get_ticket", "split_bill"),
        (called("get_ticket", "104"), not_called("split_bill"), says_word("waiting")),
        summary="one field of a ticket (waiting on customer)",
    ),
    Task(
        "split_dinner",
        "Split a 87.50 bill between 5 people.",
        ("split_bill", "get_ticket"),
        (called("split_bill", "87.5", "5"), says_number("17.5")),
        summary="a share through the tool (17.50)",
    ),
    Task(
        "new_year_weekday",
        "What day of the week is 1 January 2027?",
        ("get_weekday", "set_thermostat"),
        (called("get_weekday", "2027-01-01"), says_word("friday")),
        summary="a date written out, the tool wants YYYY-MM-DD (Friday)",
    ),
    Task(
        "cheapest_flight",
        "Book the cheapest flight from Oslo to Rome.",
        ("search_flights", "book_flight"),
        (
            called("search_flights", "oslo", "rome"),
            called("book_flight", "fr"),
            says_word("fr-1802", "fr1802", "qx7p2"),
        ),
        summary="search, then book the cheapest of three (FR-1802, 74 euros)",
    ),
    Task(
        "spider_legs",
        "How many legs does a spider have?",
        ("get_weekday", "get_air_quality"),
        (no_calls, says_word("8", "eight")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
    Task(
        "air_two_cities",
        "Compare the air quality in Delhi and Zurich.",
        ("get_air_quality", "get_weather"),
        (
            called("get_air_quality", "delhi"),
            called("get_air_quality", "zurich"),
            not_called("get_weather"),
            says_number("182"),
            says_number("21"),
        ),
        summary="two independent lookups of one tool (182 and 21)",
    ),
    Task(
        "thermostat_eco",
        "Switch the thermostat to eco mode.",
        ("set_thermostat", "get_weather"),
        (called("set_thermostat", "eco"), not_called("get_weather"), says_word("eco"), not_negated),
        summary="an action with an enum value (eco)",
    ),
    Task(
        "parcel_fee",
        "How much does it cost to ship a 3 kg parcel to Canada?",
        ("get_parcel_fee", "convert_currency"),
        (called("get_parcel_fee", "canada"), not_called("convert_currency"), says_number("24.9")),
        summary="postage through the tool (24.90 euros)",
    ),
)
# Written 2026-11-28 (session after stop 46) before any run on them (``--tasks seventh``), with eight new tools:
# a food's calories, a word to translate, a book to find and then look up by its ISBN, a question no tool
# answers, two museums' hours, an alarm, a renewal the tool refuses, the days between two dates.
SEVENTH: tuple[Task, ...] = (
    Task(
        "banana_calories",
        "How many calories are in a banana?",
        ("get_calories", "set_alarm"),
        (called("get_calories", "banana"), not_called("set_alarm"), says_number("105")),
        summary="a food's calories through the tool (105 kcal)",
    ),
    Task(
        "translate_library",
        "How do you say 'library' in Spanish? Use the dictionary.",
        ("translate_word", "get_weather"),
        (called("translate_word", "library", "sp"), says_word("biblioteca")),
        summary="a translation through the tool (biblioteca)",
    ),
    Task(
        "dune_copies",
        "Does the library have Dune on the shelf?",
        ("find_book", "library_availability"),
        (called("find_book", "dune"), called("library_availability", "0441013593"), book_on_shelf),
        summary="find the book's ISBN, then its copies (2: the answer says yes, or the number)",
    ),
    Task(
        "mix_colours",
        "Which colour do you get when you mix blue and yellow paint?",
        ("get_calories", "set_alarm"),
        (no_calls, says_word("green")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
    Task(
        "museum_hours",
        "Until when are the Louvre and the Prado open today?",
        ("get_opening_hours", "set_alarm"),
        (
            called("get_opening_hours", "louvre"),
            called("get_opening_hours", "prado"),
            not_called("set_alarm"),
            says_number("18"),
            says_number("20"),
        ),
        summary="two independent lookups of one tool (18:00 and 20:00)",
    ),
    Task(
        "wake_alarm",
        "Wake me up at 6:45 tomorrow.",
        ("set_alarm", "get_opening_hours"),
        (called("set_alarm", "6:45"), says_word("6:45"), not_negated),
        summary="an action with a time (06:45)",
    ),
    Task(
        "renew_refused",
        "Please renew my library book, barcode 4471.",
        ("renew_loan", "find_book"),
        (
            called("renew_loan", "4471"),
            renewal_refused,
        ),
        summary="the renewal is refused (another reader reserved the book): the answer says so",
    ),
    Task(
        "days_to_deadline",
        "How many days are there from 2026-03-01 to 2026-04-15?",
        ("days_between", "get_weekday"),
        (called("days_between", "2026-03-01", "2026-04-15"), says_number("45")),
        summary="a date difference through the tool (45 days)",
    ),
)
# Written 2026-11-29 (session after stop 47) before any run on them (``--tasks eighth``), with eight new tools:
# a share price, a unit conversion, a late train, a restaurant to find and then book, two lookups of two
# different tools, a list that comes back empty, a text message to send, and a question no tool answers.
EIGHTH: tuple[Task, ...] = (
    Task(
        "apple_shares",
        "What is Apple's share price right now?",
        ("get_share_price", "convert_units"),
        (called("get_share_price"), not_called("convert_units"), says_number("187.4", "187.5")),
        summary="a share price through the tool (187.44 USD)",
    ),
    Task(
        "marathon_km",
        "How many kilometres is a marathon of 26.2 miles?",
        ("convert_units", "get_share_price"),
        (called("convert_units", "26.2"), says_number("42.1", "42.2"), prose),
        summary="a unit conversion through the tool (42.16 km)",
    ),
    Task(
        "late_train",
        "Is my train 6611 to Lyon on time today?",
        ("get_train_status", "send_sms"),
        (called("get_train_status", "6611"), not_called("send_sms"), train_late),
        summary="a status with a delay (25 minutes late)",
    ),
    Task(
        "book_trattoria",
        "Book a table for 2 at an Italian restaurant in Turin at 20:00.",
        ("find_restaurant", "reserve_table"),
        (
            called("find_restaurant", "italian", "turin"),
            called("reserve_table", "r-77", "20:00"),
            says_word("trattoria sole", "c-5521", "booked", "reserved", "confirmed"),
            not_negated,
        ),
        summary="find the restaurant's id, then book it (Trattoria Sole, C-5521)",
    ),
    Task(
        "yen_and_weather",
        "What's the US dollar to yen exchange rate, and what's the weather in Tokyo?",
        ("get_exchange_rate", "get_weather"),
        (
            called("get_exchange_rate", "usd", "jpy"),
            called("get_weather", "tokyo"),
            says_number("151"),
            says_number("25"),
        ),
        summary="two independent lookups of two tools (151.2 and 25 C)",
    ),
    Task(
        "oslo_events",
        "Are there any events in Oslo this weekend?",
        ("find_events", "get_weather"),
        (called("find_events", "oslo"), says_none_found),
        summary="the tool finds nothing (an empty list): the answer says so",
    ),
    Task(
        "running_late",
        "Text +47 555 1234 that I'm running 10 minutes late.",
        ("send_sms", "get_train_status"),
        (called("send_sms", "555", "late"), says_word("sent", "texted", "message"), not_negated),
        summary="an action with two values from the question (a text sent)",
    ),
    Task(
        "mouse_plural",
        "What is the plural of the word 'mouse'?",
        ("find_events", "send_sms"),
        (no_calls, says_word("mice")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
# Written 2026-11-29 (session after stop 48) before any run on them (``--tasks ninth``), with nine new tools:
# a body mass index from two numbers of the question, a translation, an account to find and then read by its
# id, a list whose answer is what it lacks, a price to multiply, one field of a record, two lookups of two
# different tools for one city, and a question no tool answers.
NINTH: tuple[Task, ...] = (
    Task(
        "bmi_check",
        "I weigh 70 kg and I'm 1.75 m tall. What's my BMI?",
        ("calculate_bmi", "get_movie_details"),
        (called("calculate_bmi", "70", "1.75"), says_number("22.9", "22.8")),
        summary="two numbers of the question into one call (BMI 22.9)",
    ),
    Task(
        "say_good_morning",
        "How do you say 'good morning' in German?",
        ("translate_text", "get_ticket_price"),
        # the language by its name or its code (rejudged after the first run: "de" is what services take)
        (called("translate_text", "good morning"), says_word("guten morgen")),
        summary="a translation through the tool (Guten Morgen)",
    ),
    Task(
        "carol_balance",
        "What is the balance of Carol's bank account?",
        ("find_account", "get_balance"),
        (called("find_account", "carol"), called("get_balance", "ac-9031"), says_number("1520.75", "1,520.75")),
        summary="find the account's id, then read its balance (1520.75 EUR)",
    ),
    Task(
        "hotel_parking",
        "Does the Grand Hotel have parking?",
        ("get_hotel_amenities", "get_ticket_price"),
        (called("get_hotel_amenities", "grand"), no_parking),
        summary="the answer is what the list lacks (no parking)",
    ),
    Task(
        "louvre_family",
        "How much do 3 adult tickets to the Louvre cost in total?",
        ("get_ticket_price", "calculate_bmi"),
        (called("get_ticket_price", "louvre"), says_number("66")),
        summary="a price times three (22 EUR each, 66 EUR)",
    ),
    Task(
        "inception_length",
        "How long is the film Inception?",
        ("get_movie_details", "translate_text"),
        (called("get_movie_details", "inception"), length_of_inception),
        summary="one field of a record (148 minutes)",
    ),
    Task(
        "sydney_sun_pollen",
        "What are the UV index and the pollen level in Sydney today?",
        ("get_uv_index", "get_pollen_count"),
        (
            called("get_uv_index", "sydney"),
            called("get_pollen_count", "sydney"),
            says_number("9"),
            says_word("low"),
        ),
        summary="two lookups of two tools for one city (UV 9, pollen low)",
    ),
    # "Who wrote Romeo and Juliet?" in the first runs; replaced (and run again on its own) because bench/single_steps.py
    # asks it too, and the benchmarks share no question
    Task(
        "mona_lisa_painter",
        "Who painted the Mona Lisa?",
        ("get_movie_details", "translate_text"),
        (no_calls, says_word("leonardo", "da vinci")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
# Written 2026-11-29 (session after stop 48, after the ninth set's changes) before any run on them (``--tasks
# tenth``), with eight new tools: a fare between two cities, a yes/no result, a list of words, a chain through a
# person's name (not an id), an action with a time to convert, a nested result, two calls compared, and a question
# no tool answers.
TENTH: tuple[Task, ...] = (
    Task(
        "madrid_fare",
        "How much is a flight from Madrid to Berlin?",
        ("get_flight_price", "check_visa"),
        (called("get_flight_price", "madrid", "berlin"), says_number("129")),
        summary="a fare between two cities of the question (129 EUR)",
    ),
    Task(
        "japan_visa",
        "Do I need a visa to visit Japan with a Brazilian passport?",
        ("check_visa", "get_flight_price"),
        (called("check_visa", "japan", "brazil"), no_visa_needed),
        summary="a yes/no result (no visa, up to 90 days)",
    ),
    Task(
        "happy_synonym",
        "Give me a synonym for 'happy'.",
        ("find_synonyms", "get_nutrition"),
        (called("find_synonyms", "happy"), says_word("joyful", "cheerful", "content")),
        summary="a word from a list result",
    ),
    Task(
        "managers_phone",
        "What is the phone number of Tom's manager?",
        ("get_employee", "get_phone_number"),
        (called("get_employee", "tom"), called("get_phone_number", "dana"), says_word("555 0199", "555-0199")),
        summary="find the manager, then their number (Dana Lee, +1 555 0199)",
    ),
    Task(
        "remind_mom",
        "Remind me to call mom at 6pm.",
        ("create_reminder", "get_phone_number"),
        (called("create_reminder", "mom"), says_word("remind", "set", "created"), not_negated),
        summary="an action with a time to write as HH:MM",
    ),
    Task(
        "chicken_protein",
        "How much protein is in 100 g of chicken breast?",
        ("get_nutrition", "find_synonyms"),
        (called("get_nutrition", "chicken"), says_number("31")),
        summary="a value inside a nested result (31 g)",
    ),
    Task(
        "canada_or_china",
        "Which country is larger, Canada or China?",
        ("get_country_area", "get_flight_price"),
        (called("get_country_area", "canada"), called("get_country_area", "china"), canada_is_larger),
        summary="two calls of one tool, compared (Canada)",
    ),
    Task(
        "water_boils",
        "At what temperature does water boil at sea level, in Celsius?",
        ("get_nutrition", "check_visa"),
        (no_calls, says_number("100")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
# Written 2026-11-29 (session after stop 50) before any run on them (``--tasks eleventh``), with nine new tools:
# a stock level of 0, the one departure of a list that goes where asked, a list of ingredients, a chain through
# an order id found by email, two lookups of one tool, an action with a date and a time, an empty search, a price
# with an enum value, and a question no tool answers.
ELEVENTH: tuple[Task, ...] = (
    Task(
        "kettle_stock",
        "Is the blue kettle in stock?",
        ("get_stock_level", "get_ingredients"),
        (called("get_stock_level", "kettle"), kettle_out_of_stock),
        summary="a stock level of 0: the answer says no (back on 2026-12-08)",
    ),
    Task(
        "harbour_bus",
        "When does the next bus to the Harbour leave from Central Station?",
        ("get_bus_times", "get_fuel_price"),
        (called("get_bus_times", "central"), says_word("14:20", "2:20")),
        summary="the one departure of a list that goes where asked (14:20, the first goes elsewhere)",
    ),
    Task(
        "pancake_ingredients",
        "What ingredients do I need for pancakes?",
        ("get_ingredients", "get_stock_level"),
        (called("get_ingredients", "pancake"), says_word("flour"), says_word("egg")),
        summary="a list result (flour, milk, eggs, butter, salt)",
    ),
    Task(
        "order_arrival",
        "When will my order arrive? My email is ana@example.com.",
        ("find_order", "get_delivery_date"),
        (
            called("find_order", "ana@example.com"),
            called("get_delivery_date", "ord-5512"),
            says_word("2026-12-03", "december 3", "3 december", "dec 3", "3rd of december", "december 3rd", "12/03"),
        ),
        summary="find the order's id by email, then its delivery date (2026-12-03)",
    ),
    Task(
        "sunrise_two",
        "What time does the sun rise tomorrow in Oslo and in Madrid?",
        ("get_sunrise", "get_bus_times"),
        (
            called("get_sunrise", "oslo"),
            called("get_sunrise", "madrid"),
            says_word("09:12", "9:12"),
            says_word("08:27", "8:27"),
        ),
        summary="two lookups of one tool (09:12 and 08:27)",
    ),
    Task(
        "dentist_calendar",
        "Put a dentist appointment in my calendar on 2026-12-10 at 09:30.",
        ("add_calendar_event", "get_sunrise"),
        (
            called("add_calendar_event", "dentist", "2026-12-10"),
            says_word("added", "scheduled", "created", "booked", "calendar", "set"),
            not_negated,
        ),
        summary="an action with a date and a time from the question",
    ),
    Task(
        "porto_jobs",
        "Are there any open data scientist jobs in Porto?",
        ("search_jobs", "get_fuel_price"),
        (called("search_jobs", "data scientist"), says_none_found),
        summary="an empty search: the answer says none were found",
    ),
    Task(
        "diesel_hamburg",
        "How much does a litre of diesel cost in Hamburg today?",
        ("get_fuel_price", "search_jobs"),
        (called("get_fuel_price", "hamburg", "diesel"), says_number("1.689", "1.69")),
        summary="a price with an enum value from the question (1.689 EUR)",
    ),
    Task(
        "largest_planet",
        "What is the largest planet in our solar system?",
        ("get_ingredients", "search_jobs"),
        (no_calls, says_word("jupiter")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
# Written 2026-11-29 (session after stop 52) before any run on them (``--tasks twelfth``), with twelve new tools
# and shapes the earlier sets lack: a yes/no read from a false flag, a chain whose answer compares two numbers of
# the result, three string arguments with a time, a list of two times, an array argument, an integer with bounds,
# an action that depends on a looked-up amount, a match result to read, a list of names, and a question no tool
# answers.
TWELFTH: tuple[Task, ...] = (
    Task(
        "domain_taken",
        "Is the domain brightpaws.com still available?",
        ("check_domain", "get_tide_times"),
        (called("check_domain", "brightpaws.com"), domain_taken),
        summary="a false flag read as a no (registered since 2024)",
    ),
    Task(
        "mia_maths",
        "Did Mia pass her maths exam?",
        ("find_student", "get_grades"),
        (called("find_student", "mia"), called("get_grades", "s-88"), mia_failed),
        summary="find the student's id, then compare her grade with the pass mark (38 < 50: no)",
    ),
    Task(
        "london_chicago",
        "If it's 09:00 in London, what time is it in Chicago?",
        ("convert_time_zone", "get_tide_times"),
        (called("convert_time_zone", "london", "chicago"), says_word("03:00", "3:00", "3 am", "3am", "3 a.m")),
        summary="three arguments from the question, one a time (03:00)",
    ),
    Task(
        "brighton_tide",
        "When is high tide in Brighton today?",
        ("get_tide_times", "check_domain"),
        (called("get_tide_times", "brighton"), says_word("05:42", "5:42"), says_word("18:03", "6:03")),
        summary="a list of two times, both asked for (05:42 and 18:03; low tide 11:55 is not)",
    ),
    Task(
        "pizza_order",
        "Order a large pizza with mushrooms and olives.",
        ("order_pizza", "get_tide_times"),
        (
            called("order_pizza", "large", "mushroom", "olive"),
            says_word("order", "35", "on its way", "placed"),
            not_negated,
        ),
        summary="an array argument and an enum (PZ-301, 35 minutes)",
    ),
    Task(
        "dim_lights",
        "Dim the living room lights to 30%.",
        ("set_light", "order_pizza"),
        (called("set_light", "living", "30"), says_number("30"), not_negated),
        summary="an integer argument with bounds, from a percentage",
    ),
    Task(
        "pay_invoice_if",
        "Pay invoice INV-7 if it's under 100 euros.",
        ("get_invoice", "pay_invoice"),
        (called("get_invoice", "inv-7"), called("pay_invoice", "inv-7"), says_word("paid", "payment"), not_negated),
        summary="an action that depends on a looked-up amount (84.50 EUR: pay it)",
    ),
    Task(
        "benfica_result",
        "Did Benfica win their last match?",
        ("get_last_match", "get_grades"),
        (called("get_last_match", "benfica"), benfica_lost),
        summary="a match result to read (1-2 at home to Porto: no)",
    ),
    Task(
        "lentil_recipes",
        "What can I cook with lentils?",
        ("search_recipes", "order_pizza"),
        (called("search_recipes", "lentil"), says_word("dal"), says_word("soup")),
        summary="a list of recipe names (lentil soup, dal tadka, warm lentil salad)",
    ),
    # "Who wrote Romeo and Juliet?" (romeo_author) in the first runs, 7 of 7 each; replaced (and run again on its
    # own) because bench/single_steps.py asks it too, and the benchmarks share no question
    Task(
        "continents",
        "How many continents are there?",
        ("check_domain", "search_recipes"),
        (no_calls, says_word("seven", "7")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
# Written 2026-11-29 (session after stop 52) before any run on them (``--tasks thirteenth``), with nine new tools
# and shapes no earlier set has: an integer id, four arguments with two enums, a tool without parameters whose list
# is compared, a boolean argument, a count, an object argument, a rate in percent, a typo the tool's error corrects,
# two calls compared, and a question no tool answers.
THIRTEENTH: tuple[Task, ...] = (
    Task(
        "pr_merged",
        "Is pull request #482 merged yet?",
        ("get_pull_request", "get_device_batteries"),
        (called("get_pull_request", "482"), not_merged),
        summary="an integer id and a false flag (still open, 1 approval)",
    ),
    Task(
        "flour_grams",
        "How many grams are 3 cups of flour?",
        ("convert_cooking", "calculate_vat"),
        (called("convert_cooking", "flour", "cup", "gram"), says_number("375")),
        summary="four arguments, two of them enums (375 g)",
    ),
    Task(
        "lowest_battery",
        "Which of my devices has the lowest battery?",
        ("get_device_batteries", "set_device_power"),
        (called("get_device_batteries"), says_word("watch")),
        summary="a tool without parameters, its list compared (the watch, 12%)",
    ),
    Task(
        "heater_off",
        "Turn off the kitchen heater.",
        ("set_device_power", "get_device_batteries"),
        (called("set_device_power", "kitchen", "false"), says_word("off"), not_negated),
        summary="a boolean argument (on: false)",
    ),
    Task(
        "party_count",
        "How many people are coming to the launch party?",
        ("get_event_attendees", "create_contact"),
        (called("get_event_attendees", "launch"), says_number("47")),
        summary="a count beside another (47 attending, 5 declined)",
    ),
    Task(
        "save_contact",
        "Save Ana Silva's number, +351 912 345 678, in my contacts.",
        ("create_contact", "get_event_attendees"),
        (called("create_contact", "ana silva", "912"), says_word("saved", "added", "created", "contact"), not_negated),
        summary="an object argument (contact: {name, phone})",
    ),
    Task(
        "vat_amount",
        "How much VAT is 18% of 250 euros?",
        ("calculate_vat", "convert_cooking"),
        (called("calculate_vat", "250"), says_number("45")),
        summary="a rate in percent (45 euros)",
    ),
    Task(
        "pariss_typo",
        "What's the humidity in Pariss right now?",
        ("get_humidity", "distance_between"),
        (called("get_humidity", '"paris"'), says_number("64")),
        summary="a typo the tool's error corrects (did you mean 'Paris'? 64%)",
    ),
    Task(
        "closer_city",
        "Which is closer to Berlin by road, Prague or Vienna?",
        ("distance_between", "get_humidity"),
        (called("distance_between", "prague"), called("distance_between", "vienna"), prague_is_closer),
        summary="two calls compared (Prague, 350 km against 680)",
    ),
    Task(
        "gold_symbol",
        "What is the chemical symbol for gold?",
        ("get_event_attendees", "convert_cooking"),
        (no_calls, says_word("au")),
        needs_tool=False,
        summary="general knowledge: no tool",
    ),
)
TASKS_BY_NAME = {
    task.name: task
    for task in (
        *TASKS,
        *HELD_OUT,
        *FRESH,
        *UNSEEN,
        *FOURTH,
        *FIFTH,
        *SIXTH,
        *SEVENTH,
        *EIGHTH,
        *NINTH,
        *TENTH,
        *ELEVENTH,
        *TWELFTH,
        *THIRTEENTH,
    )
}
