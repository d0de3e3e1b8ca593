"""bench/agent_loops.py's own logic, without a model: the tools, the checks, the judging, the records."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from toolshim.config.loading import load_rules as toolshim_rules

from bench.agent_loops import (
    LoopRecord,
    call_words,
    client_view,
    judge,
    load_rules,
    markup_in_answer,
    parse_args,
    rejudge,
    run_all,
    tables,
    texts_sent,
    toolshim_text_in,
    usage_tokens,
)
from bench.loop_clients import LoopEnd, _pydantic_model, execute
from bench.loop_tasks import (
    EIGHTH,
    ELEVENTH,
    FIFTH,
    FOURTH,
    FRESH,
    HELD_OUT,
    NINTH,
    SEVENTH,
    SIXTH,
    TASKS,
    TASKS_BY_NAME,
    TENTH,
    THIRTEENTH,
    TOOLS,
    TWELFTH,
    UNSEEN,
    Call,
    Toolbox,
    number_in,
)
from tests.realmodel.recorder import Exchange

ROOT = Path(__file__).resolve().parents[1]
# every task of every set
ALL_TASKS = (
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

# For each task: calls a good loop makes (name, arguments) and an answer a good loop gives.
GOOD: dict[str, tuple[list[tuple[str, dict[str, object]]], str]] = {
    "weather_f": (
        [("get_weather", {"city": "Oslo"}), ("convert_temperature", {"value": 4, "to_unit": "fahrenheit"})],
        "It is 39.2°F in Oslo, with light snow.",
    ),
    "order_status": ([("get_order_status", {"order_id": "#A1234"})], "Your order A1234 has shipped with DHL."),
    "calendar": (
        [("add_event", {"title": "Dentist appointment", "date": "2025-03-14", "time": "9:30"})],
        "Done: the dentist appointment is in your calendar.",
    ),
    "calculator": ([("calculator", {"expression": "1234 * 5678 + 9"})], "1234 * 5678 + 9 = 7,006,661."),
    "two_step": (
        [("get_colleague", {"name": "Alice"}), ("get_weather", {"city": "Lisbon, Portugal"})],
        "Alice lives in Lisbon, where it is 21 °C and clear.",
    ),
    "two_cities": (
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})],
        "Paris: 18 °C and sunny; Tokyo: 25 °C and cloudy.",
    ),
    "currency": (
        [("convert_currency", {"amount": 250, "from_currency": "USD", "to_currency": "EUR"})],
        "250 USD is 230.00 EUR.",
    ),
    "length": (
        [("convert_length", {"value": 26.2, "from_unit": "miles", "to_unit": "kilometers"})],
        "A marathon is 42.16 km.",
    ),
    "no_tool": ([], "Hello! The capital of France is Paris."),
    "capital_weather": ([("get_weather", {"city": "Tokyo"})], "It is cloudy in Tokyo, 25 C."),
    "order_eta": ([("get_order_status", {"order_id": "B5678"})], "Not yet: it is expected on 2025-03-21."),
    "percent": ([("calculator", {"expression": "0.15 * 240"})], "15% of 240 is 36."),
    "euros_to_dollars": (
        [("convert_currency", {"amount": 100, "from_currency": "EUR", "to_currency": "USD"})],
        "100 euros is 109 US dollars.",
    ),
    "colleague_facts": ([("get_colleague", {"name": "Alice"})], "Alice lives in Lisbon and is on the design team."),
    "km_to_miles": (
        [("convert_length", {"value": 10, "from_unit": "kilometers", "to_unit": "miles"})],
        "10 km is 6.21 miles.",
    ),
    "thanks": ([], "You're welcome, have a nice day!"),
    "stock_price": ([("get_stock_price", {"symbol": "AAPL"})], "Apple (AAPL) trades at $231.50."),
    "sydney_time": ([("get_local_time", {"city": "Sydney"})], "It is 00:05 in Sydney."),
    "define": ([("define_word", {"word": "ephemeral"})], "Ephemeral means lasting for a very short time."),
    "distance_miles": (
        [
            ("get_distance", {"from_city": "Paris", "to_city": "Berlin"}),
            ("convert_length", {"value": 878, "from_unit": "kilometers", "to_unit": "miles"}),
        ],
        "Paris to Berlin is 878 km, about 545.56 miles.",
    ),
    "unknown_order": ([("get_order_status", {"order_id": "Z9999"})], "I could not find an order Z9999."),
    "headphones": (
        [("search_products", {"query": "wireless headphones"})],
        "Yes: the SoundLite Air wireless headphones cost $79.",
    ),
    "two_clocks": (
        [("get_local_time", {"city": "Berlin"}), ("get_local_time", {"city": "New York"})],
        "Berlin: 14:05; New York: 08:05.",
    ),
    "haiku": ([], "Red leaves drift and fall / the maple lets go softly / autumn holds its breath"),
    "flight_delay": ([("get_flight_status", {"flight_number": "LH 400"})], "LH400 is delayed by 35 minutes."),
    "table_full": (
        [("book_table", {"restaurant": "Luigi's", "people": 2, "time": "20:00"})],
        "Luigi's is fully booked at 20:00; a table is free at 21:30.",
    ),
    "mug_stock": ([("check_stock", {"item": "blue mug"})], "The blue mug is out of stock."),
    "user_orders": (
        [("find_user", {"email": "bob@example.com"}), ("list_orders", {"user_id": "U-77"})],
        "Bob has placed 3 orders.",
    ),
    "split_bill": ([("calculator", {"expression": "86.40 / 3"})], "Each person pays $28.80."),
    "two_populations": (
        [("get_population", {"city": "Lisbon"}), ("get_population", {"city": "Porto"})],
        "Lisbon has 545,000 people and Porto 232,000.",
    ),
    "on_time": ([("get_flight_status", {"flight_number": "BA117"})], "BA117 leaves from gate A7."),
    "translate": ([], 'In Spanish you say "gracias".'),
    "parcel": ([("track_package", {"tracking_number": "1Z999"})], "It is in transit and arrives on Friday."),
    "phone": ([("lookup_contact", {"name": "Maria"})], "Maria's number is +34 600 123 456."),
    "showtimes": ([("get_showtimes", {"movie": "Dune", "city": "Madrid"})], "At 18:30 and 21:00."),
    "tip": ([("calculate_tip", {"amount": 60, "percent": 15})], "Tip $9."),
    "airport_wait": (
        [("find_airport", {"city": "Lisbon"}), ("get_security_wait", {"airport_code": "LIS"})],
        "About 25 minutes at Lisbon's airport.",
    ),
    "two_hotels": (
        [("get_room_price", {"hotel": "the Ritz"}), ("get_room_price", {"hotel": "Savoy"})],
        "The Ritz costs 450 euros a night, the Savoy 380.",
    ),
    "unknown_contact": ([("lookup_contact", {"name": "Zoe"})], "Zoe is not in your address book."),
    "square_root": ([], "The square root of 81 is 9."),
    "bake_time": ([("get_recipe", {"name": "sourdough"})], "Bake it for 45 minutes at 230 °C."),
    "next_bus": ([("next_departures", {"stop": "Central Station", "line": "12"})], "The next one leaves at 14:05."),
    "laptop_battery": (
        [("list_devices", {}), ("get_battery", {"device_id": "d-1"})],
        "Your laptop's battery is at 64%.",
    ),
    "capital": ([], "The capital of Japan is Tokyo."),
    "two_mountains": (
        [("get_elevation", {"place": "Mont Blanc"}), ("get_elevation", {"place": "Matterhorn"})],
        "Mont Blanc is 4,806 m high and the Matterhorn 4,478 m.",
    ),
    "refund_refused": (
        [("request_refund", {"order_id": "B-552"})],
        "I couldn't refund order B-552: the 30-day refund window closed on 2026-10-01.",
    ),
    "discount": ([("apply_discount", {"price": 240, "percent": 15})], "With 15% off it costs 204 euros."),
    "room_taken": (
        [("check_room", {"room": "Orion", "time": "15:00"})],
        "No, Orion is booked by the Sales team at 15:00.",
    ),
    "ticket_status": ([("get_ticket", {"ticket_id": "T-104"})], "Ticket T-104 is waiting on the customer."),
    "split_dinner": ([("split_bill", {"total": 87.5, "people": 5})], "Each of the 5 people pays 17.50."),
    "new_year_weekday": ([("get_weekday", {"date": "2027-01-01"})], "1 January 2027 is a Friday."),
    "cheapest_flight": (
        [("search_flights", {"origin": "Oslo", "destination": "Rome"}), ("book_flight", {"flight_id": "FR-1802"})],
        "Booked FR-1802 from Oslo to Rome for 74 euros; your reference is QX7P2.",
    ),
    "spider_legs": ([], "A spider has eight legs."),
    "air_two_cities": (
        [("get_air_quality", {"city": "Delhi"}), ("get_air_quality", {"city": "Zurich"})],
        "Delhi's AQI is 182, far worse than Zurich's 21.",
    ),
    "thermostat_eco": ([("set_thermostat", {"mode": "eco"})], "The thermostat is now in eco mode."),
    "parcel_fee": (
        [("get_parcel_fee", {"weight_kg": 3, "country": "Canada"})],
        "Shipping 3 kg to Canada costs 24.90 euros.",
    ),
    "banana_calories": ([("get_calories", {"food": "banana"})], "A medium banana has about 105 calories."),
    "translate_library": (
        [("translate_word", {"word": "library", "language": "Spanish"})],
        'In Spanish, "library" is "biblioteca".',
    ),
    "dune_copies": (
        [("find_book", {"title": "Dune"}), ("library_availability", {"isbn": "978-0441013593"})],
        "Yes: the Main Library has 2 copies of Dune on the shelf.",
    ),
    "mix_colours": ([], "Blue and yellow make green."),
    "museum_hours": (
        [("get_opening_hours", {"museum": "Louvre"}), ("get_opening_hours", {"museum": "Prado"})],
        "The Louvre is open until 18:00 and the Prado until 20:00.",
    ),
    "wake_alarm": ([("set_alarm", {"time": "06:45"})], "Your alarm is set for 6:45."),
    "renew_refused": (
        [("renew_loan", {"barcode": "4471"})],
        "I couldn't renew book 4471: another reader has reserved it.",
    ),
    "days_to_deadline": (
        [("days_between", {"start": "2026-03-01", "end": "2026-04-15"})],
        "There are 45 days from 2026-03-01 to 2026-04-15.",
    ),
    "apple_shares": ([("get_share_price", {"symbol": "AAPL"})], "Apple (AAPL) trades at 187.44 USD."),
    "marathon_km": (
        [("convert_units", {"value": 26.2, "from_unit": "mi", "to_unit": "km"})],
        "A marathon of 26.2 miles is 42.16 km.",
    ),
    "late_train": ([("get_train_status", {"train_number": "6611"})], "No: train 6611 to Lyon is 25 minutes late."),
    "book_trattoria": (
        [
            ("find_restaurant", {"cuisine": "Italian", "city": "Turin"}),
            ("reserve_table", {"restaurant_id": "R-77", "time": "20:00", "people": 2}),
        ],
        "Your table for 2 at Trattoria Sole is booked for 20:00 (confirmation C-5521).",
    ),
    "yen_and_weather": (
        [("get_exchange_rate", {"from_currency": "USD", "to_currency": "JPY"}), ("get_weather", {"city": "Tokyo"})],
        "One US dollar buys 151.2 yen, and Tokyo is cloudy at 25 C.",
    ),
    "oslo_events": ([("find_events", {"city": "Oslo"})], "There are no events listed in Oslo this weekend."),
    "running_late": (
        [("send_sms", {"to": "+47 555 1234", "message": "I'm running 10 minutes late."})],
        "I sent the message to +47 555 1234.",
    ),
    "mouse_plural": ([], "The plural of mouse is mice."),
    "bmi_check": ([("calculate_bmi", {"weight_kg": 70, "height_m": 1.75})], "Your BMI is 22.9, in the normal range."),
    "say_good_morning": (
        [("translate_text", {"text": "good morning", "target_language": "German"})],
        "In German, 'good morning' is 'Guten Morgen'.",
    ),
    "carol_balance": (
        [("find_account", {"name": "Carol"}), ("get_balance", {"account_id": "AC-9031"})],
        "Carol's account AC-9031 holds 1,520.75 EUR.",
    ),
    "hotel_parking": (
        [("get_hotel_amenities", {"hotel": "Grand Hotel"})],
        "The Grand Hotel does not list parking: it has free wifi, a pool, a gym and a restaurant.",
    ),
    "louvre_family": (
        [("get_ticket_price", {"attraction": "Louvre"})],
        "An adult ticket is 22 EUR, so three cost 66 EUR.",
    ),
    "inception_length": ([("get_movie_details", {"title": "Inception"})], "Inception runs 148 minutes (2 h 28 min)."),
    "sydney_sun_pollen": (
        [("get_uv_index", {"city": "Sydney"}), ("get_pollen_count", {"city": "Sydney"})],
        "In Sydney the UV index is 9 (very high) and the pollen level is low.",
    ),
    "mona_lisa_painter": ([], "Leonardo da Vinci painted the Mona Lisa."),
    "madrid_fare": ([("get_flight_price", {"origin": "Madrid", "destination": "Berlin"})], "The cheapest is 129 EUR."),
    "japan_visa": (
        [("check_visa", {"nationality": "Brazilian", "country": "Japan"})],
        "No: with a Brazilian passport you can visit Japan without a visa for up to 90 days.",
    ),
    "happy_synonym": ([("find_synonyms", {"word": "happy"})], "A synonym for happy is joyful."),
    "managers_phone": (
        [("get_employee", {"name": "Tom"}), ("get_phone_number", {"person": "Dana Lee"})],
        "Tom's manager is Dana Lee; her number is +1 555 0199.",
    ),
    "remind_mom": (
        [("create_reminder", {"text": "Call mom", "time": "18:00"})],
        "Done: I set a reminder to call mom at 18:00.",
    ),
    "chicken_protein": (
        [("get_nutrition", {"food": "chicken breast"})],
        "100 g of chicken breast has 31 g of protein.",
    ),
    "canada_or_china": (
        [("get_country_area", {"country": "Canada"}), ("get_country_area", {"country": "China"})],
        "Canada is larger: 9,984,670 km² against China's 9,596,961 km².",
    ),
    "water_boils": ([], "Water boils at 100 °C at sea level."),
    "kettle_stock": ([("get_stock_level", {"product": "blue kettle"})], "No, it is out of stock until 2026-12-08."),
    "harbour_bus": (
        [("get_bus_times", {"stop": "Central Station"})],
        "The next bus to the Harbour leaves at 14:20 (line 3).",
    ),
    "pancake_ingredients": (
        [("get_ingredients", {"dish": "pancakes"})],
        "You need flour, milk, eggs, butter and a pinch of salt.",
    ),
    "order_arrival": (
        [("find_order", {"email": "ana@example.com"}), ("get_delivery_date", {"order_id": "ORD-5512"})],
        "Your order ORD-5512 should arrive on 2026-12-03.",
    ),
    "sunrise_two": (
        [("get_sunrise", {"city": "Oslo"}), ("get_sunrise", {"city": "Madrid"})],
        "Tomorrow the sun rises at 09:12 in Oslo and at 08:27 in Madrid.",
    ),
    "dentist_calendar": (
        [("add_calendar_event", {"title": "Dentist appointment", "date": "2026-12-10", "time": "09:30"})],
        "I added the dentist appointment to your calendar for 2026-12-10 at 09:30.",
    ),
    "porto_jobs": (
        [("search_jobs", {"title": "data scientist", "city": "Porto"})],
        "There are no open data scientist jobs in Porto right now.",
    ),
    "diesel_hamburg": (
        [("get_fuel_price", {"city": "Hamburg", "fuel": "diesel"})],
        "Diesel costs 1.689 EUR per litre in Hamburg today.",
    ),
    "largest_planet": ([], "Jupiter is the largest planet in our solar system."),
    "domain_taken": (
        [("check_domain", {"domain": "brightpaws.com"})],
        "No, brightpaws.com is already registered (since 2024-05-02), so it is not available.",
    ),
    "mia_maths": (
        [("find_student", {"name": "Mia"}), ("get_grades", {"student_id": "S-88"})],
        "No, Mia did not pass her maths exam: she scored 38 and the pass mark is 50.",
    ),
    "london_chicago": (
        [("convert_time_zone", {"time": "09:00", "from_city": "London", "to_city": "Chicago"})],
        "When it is 09:00 in London, it is 03:00 in Chicago.",
    ),
    "brighton_tide": (
        [("get_tide_times", {"place": "Brighton"})],
        "High tide in Brighton is at 05:42 and at 18:03 today.",
    ),
    "pizza_order": (
        [("order_pizza", {"size": "large", "toppings": ["mushrooms", "olives"]})],
        "Your large pizza with mushrooms and olives is ordered (PZ-301) and arrives in about 35 minutes.",
    ),
    "dim_lights": (
        [("set_light", {"room": "living room", "brightness": 30})],
        "The living room lights are now at 30%.",
    ),
    "pay_invoice_if": (
        [("get_invoice", {"invoice_id": "INV-7"}), ("pay_invoice", {"invoice_id": "INV-7"})],
        "Invoice INV-7 was 84.50 EUR, under 100 euros, so I paid it (confirmation PAY-5531).",
    ),
    "benfica_result": (
        [("get_last_match", {"team": "Benfica"})],
        "No, Benfica lost their last match 1-2 at home to Porto.",
    ),
    "lentil_recipes": (
        [("search_recipes", {"ingredient": "lentils"})],
        "With lentils you could cook lentil soup, dal tadka or a warm lentil salad.",
    ),
    "continents": ([], "There are seven continents."),
    "pr_merged": ([("get_pull_request", {"number": 482})], "No, pull request #482 is still open, with one approval."),
    "flour_grams": (
        [("convert_cooking", {"amount": 3, "from_unit": "cups", "to_unit": "grams", "ingredient": "flour"})],
        "3 cups of flour are 375 grams.",
    ),
    "lowest_battery": ([("get_device_batteries", {})], "Your watch has the lowest battery, at 12%."),
    "heater_off": (
        [("set_device_power", {"device": "kitchen heater", "on": False})],
        "The kitchen heater is off now.",
    ),
    "party_count": (
        [("get_event_attendees", {"event": "launch party"})],
        "47 people are coming to the launch party (5 declined).",
    ),
    "save_contact": (
        [("create_contact", {"contact": {"name": "Ana Silva", "phone": "+351 912 345 678"}})],
        "I saved Ana Silva's number in your contacts.",
    ),
    "vat_amount": ([("calculate_vat", {"amount": 250, "rate": 18})], "18% VAT on 250 euros is 45 euros."),
    "pariss_typo": (
        [("get_humidity", {"city": "Pariss"}), ("get_humidity", {"city": "Paris"})],
        "The humidity in Paris is 64% right now.",
    ),
    "closer_city": (
        [
            ("distance_between", {"from_city": "Berlin", "to_city": "Prague"}),
            ("distance_between", {"from_city": "Berlin", "to_city": "Vienna"}),
        ],
        "Prague is closer to Berlin: 350 km by road, against 680 km to Vienna.",
    ),
    "gold_symbol": ([], "The chemical symbol for gold is Au."),
}
# tasks whose good loop gets an error result (and says so, or calls again as it says)
ERROR_RESULTS = {"unknown_order", "unknown_contact", "pariss_typo"}


def run_calls(calls: list[tuple[str, dict[str, object]]], errors_ok: bool = False) -> Toolbox:
    box = Toolbox()
    for name, args in calls:
        result = json.loads(TOOLS[name].run(box, args))
        assert errors_ok or "error" not in result, (name, args, result)
    return box


def test_every_task_has_a_good_loop_here() -> None:
    assert set(GOOD) == set(TASKS_BY_NAME)
    assert sum(not t.needs_tool for t in TASKS) >= 1 and len(TASKS) >= 8


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name)
def test_a_good_loop_passes_its_checks(task: object) -> None:
    assert hasattr(task, "judge")
    calls, answer = GOOD[task.name]  # type: ignore[attr-defined]
    box = run_calls(calls, errors_ok=task.name in ERROR_RESULTS)  # type: ignore[attr-defined]
    assert task.judge(answer, box.calls) == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "task",
    [t for t in ALL_TASKS if t.needs_tool],
    ids=lambda t: t.name,
)
def test_no_call_or_no_result_fails(task: object) -> None:
    calls, answer = GOOD[task.name]  # type: ignore[attr-defined]
    assert task.judge(answer, []) != []  # type: ignore[attr-defined]
    box = run_calls(calls, errors_ok=task.name in ERROR_RESULTS)  # type: ignore[attr-defined]
    assert task.judge("I can't tell.", box.calls) != []  # type: ignore[attr-defined]


def test_distractors_and_tools_for_a_question_that_needs_none_fail() -> None:
    box = run_calls([("get_order_status", {"order_id": "A1234"}), ("cancel_order", {"order_id": "A1234"})])
    assert TASKS_BY_NAME["order_status"].judge("It has shipped.", box.calls) == ["unrequested cancel_order executed"]
    box = run_calls([("get_weather", {"city": "Paris"})])
    assert TASKS_BY_NAME["no_tool"].judge("It is Paris.", box.calls) != []


def test_a_tool_result_handed_on_as_the_answer_fails() -> None:
    calls, _ = GOOD["length"]
    problems = TASKS_BY_NAME["length"].judge('{"kilometers": 42.16}', run_calls(calls).calls)
    assert problems == ["answer is a bare JSON value, not a sentence"]


def test_a_refused_refund_is_read_in_its_wordings() -> None:
    calls, _ = GOOD["refund_refused"]
    box = run_calls(calls)
    judge = TASKS_BY_NAME["refund_refused"].judge
    assert judge("Order B-552 was not refunded: its 30-day refund window closed on 2026-10-01.", box.calls) == []
    assert judge("Your order B-552 has been refunded.", box.calls) != []


def test_a_calendar_answer_that_says_it_failed_fails() -> None:
    calls, _ = GOOD["calendar"]
    box = run_calls(calls)
    problems = TASKS_BY_NAME["calendar"].judge("The dentist appointment was not added to the calendar.", box.calls)
    assert problems == ["answer says it did not work ('not')"]
    assert TASKS_BY_NAME["calendar"].judge("I couldn't add it to the calendar.", box.calls) != []


def test_the_tools_are_deterministic_and_tolerant() -> None:
    box = Toolbox()
    assert json.loads(TOOLS["get_weather"].run(box, {"city": "paris, france"}))["temperature_celsius"] == 18
    assert "error" in json.loads(TOOLS["get_weather"].run(box, {"city": "Atlantis"}))
    assert "error" in json.loads(TOOLS["get_weather"].run(box, {}))
    assert json.loads(TOOLS["calculator"].run(box, {"expression": "2^10"}))["result"] == 1024
    assert "error" in json.loads(TOOLS["calculator"].run(box, {"expression": "__import__('os')"}))
    assert "error" in json.loads(TOOLS["calculator"].run(box, {"expression": "9**9**9"}))
    assert json.loads(TOOLS["convert_temperature"].run(box, {"value": "4", "to_unit": "F"})) == {"fahrenheit": 39.2}
    assert len(box.calls) == 7  # every call is recorded, failed ones too
    assert execute(None, "nope", "{}", box) == json.dumps({"error": "no tool named 'nope'"})
    assert "not valid JSON" in execute(TOOLS["get_weather"], "get_weather", "{city", box)
    assert box.calls[-1] == Call("get_weather", {"_raw": "{city"})


@pytest.mark.parametrize(
    ("text", "number", "found"),
    [
        ("39.2°F", "39", True),
        ("390 F", "39", False),
        ("about 39 degrees", "39", True),
        ("7,006,661", "7006661", True),
        ("7 006 661", "7006661", True),
        ("70066610", "7006661", False),
        ("42.16 km", "42.1", True),
        ("42.2 km", "42.1", False),
        ("230.00 EUR", "230", True),
        ("1.230", "230", False),
    ],
)
def test_numbers_are_found_however_written(text: str, number: str, found: bool) -> None:
    assert number_in(text, number) is found


NAMES = sorted(TOOLS)


@pytest.mark.parametrize(
    "answer",
    [
        "[get_weather(city='Paris')]",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
        'Sure: get_weather(city="Paris")',
        "get_weather\ncity: Paris",
        'Action: get_weather\nAction Input: {"city": "Paris"}',
        "<function=get_weather><parameter=city>Paris</parameter></function>",
        '{"name": "calculator", "arguments": {"expression": "1+1"}}',
        "[calculator, 1234 * 5678 + 9]",
    ],
)
def test_markup_in_an_answer_is_found(answer: str) -> None:
    assert markup_in_answer(answer, NAMES)


@pytest.mark.parametrize(
    "answer",
    ["It is 18 °C in Paris, says get_weather.", "The calculator gives 7006661.", "Weather: sunny\ncity: Paris"],
)
def test_plain_answers_have_no_markup(answer: str) -> None:
    assert not markup_in_answer(answer, NAMES)


def exchange(request: dict[str, object], raw: object = None, path: str = "/v1/chat/completions") -> Exchange:
    ex = Exchange(path=path, request=request, status=200)
    ex.raw.extend(raw.encode() if isinstance(raw, str) else json.dumps(raw).encode())
    return ex


def test_toolshim_text_is_what_only_the_upstream_side_carries() -> None:
    client = [exchange({"messages": [{"role": "system", "content": "You are a helpful assistant, kind and brief."}]})]
    guard = (
        "You called `calculator` with the same arguments 3 times in a row; calling it again will not give a "
        "different result. Do not call tools now: answer with what you have, or explain the problem."
    )
    upstream = [
        exchange(
            {
                "messages": [
                    {
                        "role": "system",
                        "content": "You are a helpful assistant, kind and brief.\n\nTo call functions, reply "
                        "with only a Python list of calls.\n\n" + guard,
                    },
                    {"role": "assistant", "content": "the model wrote this and it is not toolshim text"},
                    {"role": "user", "content": "get_weather city name arguments city get_weather name"},
                ]
            }
        )
    ]
    client_texts, upstream_texts = texts_sent(client, upstream)
    words = call_words([TOOLS["get_weather"].openai()])

    def found(answer: str) -> list[str]:
        return toolshim_text_in(answer, client_texts, upstream_texts, words)

    assert "reply with only a python list" in found("Sure. Reply with only a Python list of calls, please.")
    assert found("The calculator did not give a different result when called 3 times in a row.")[0].startswith(
        "paraphrase: "
    )
    assert not found("You are a helpful assistant, kind and brief.")
    assert not found("the model wrote this and it is not toolshim text")
    assert not found("get_weather city name arguments city get_weather name")
    assert not found("The result is 7006661: 1234 times 5678, plus 9.")
    # five words the client sent and one beside them, in toolshim's folded line, are no text of toolshim's
    assert not found("The tool sent 'You are a helpful assistant, kind and brief' To the user.")
    assert found("It said you are a helpful assistant, kind and brief. To call functions, reply now.")


def test_the_client_view_and_usage_of_each_api() -> None:
    chat = exchange(
        {},
        {
            "object": "chat.completion",
            "choices": [
                {
                    "message": {
                        "content": None,
                        "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
                    }
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )
    assert client_view(chat)["calls"] == ['get_weather({"city":"Paris"})'] and usage_tokens(chat) == 15
    chunks = [
        {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "It is "}}]},
        {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "sunny."}}]},
        {"object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    ]
    streamed = exchange({"stream": True}, "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")
    assert client_view(streamed)["text"] == "It is sunny." and usage_tokens(streamed) == 7
    done = {
        "type": "response.completed",
        "response": {
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Sunny."}]}],
            "usage": {"input_tokens": 8, "output_tokens": 2, "total_tokens": 10},
        },
    }
    responses = exchange({"stream": True}, f"event: response.completed\ndata: {json.dumps(done)}\n\n", "/v1/responses")
    assert client_view(responses)["text"] == "Sunny." and usage_tokens(responses) == 10


def test_the_verdict_takes_the_first_failure_kind() -> None:
    task = TASKS_BY_NAME["two_cities"]
    calls, answer = GOOD["two_cities"]
    box = run_calls(calls)

    def verdict(end: LoopEnd | None, **fields: object) -> str:
        record = LoopRecord("openai", task.name, 0, **fields)  # type: ignore[arg-type]
        judge(record, task, end, box)
        return record.kind

    assert verdict(LoopEnd(answer)) == "ok"
    assert verdict(LoopEnd(capped=True)) == "capped"
    assert verdict(None, error="time cap: no answer within 5 s") == "timeout"
    assert verdict(None, error="APIError: boom") == "error"
    assert verdict(LoopEnd(answer), markup=["[get_weather("]) == "markup"
    assert verdict(LoopEnd(answer), toolshim_text=["call at most one tool per"]) == "toolshim_text"
    assert verdict(LoopEnd(" ")) == "empty"
    assert verdict(LoopEnd("It is 18 and 25.")) == "ok"
    assert verdict(LoopEnd("Sunny.")) == "wrong_answer"
    assert verdict(LoopEnd('{"temperature_celsius": 18}')) == "raw_result"
    box.calls.pop()
    assert verdict(LoopEnd(answer)) == "wrong_calls"


def test_the_tables_count_per_framework_and_overall() -> None:
    records = [
        LoopRecord("openai", "calculator", 0, kind="ok", correct=True, rounds=2, seconds=3.0),
        LoopRecord("openai", "no_tool", 0, kind="wrong_answer", rounds=1, seconds=1.0),
        LoopRecord("langgraph", "calculator", 0, kind="capped", rounds=8, seconds=9.0),
        LoopRecord("langgraph", "no_tool", 0, kind="ok", correct=True, rounds=1, seconds=1.0),
    ]
    tasks = [TASKS_BY_NAME["calculator"], TASKS_BY_NAME["no_tool"]]
    text = tables(records, ["openai", "langgraph"], tasks)
    assert "| openai | ✓ | A | 1/2 (50%) |" in text
    assert "| langgraph | C | ✓ | 1/2 (50%) |" in text
    assert "| all | 2/4 (50%) | 1/2 (50%) | 1/2 (50%) | 1 |" in text


def test_the_rules_point_at_the_relay_and_take_the_settings(tmp_path: Path) -> None:
    rules, model, rule = load_rules(
        ROOT / "demo" / "rules.json5",
        None,
        ["tool_mode=hermes", "constrained=true", "offer_tools=always", "upstream.constraint_dialect=gbnf"],
        "http://127.0.0.1:9/v1",
        "served-model",
    )
    assert model == "demo-model"
    assert rule["tool_mode"] == "hermes" and rule["constrained"] is True and rule["upstream_model"] == "served-model"
    assert rules["upstreams"]["local"] == {"base_url": "http://127.0.0.1:9/v1", "constraint_dialect": "gbnf"}
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    toolshim_rules(path)  # toolshim accepts what the bench serves
    rules, model, rule = load_rules(ROOT / "rules" / "default.json5", "local-coder", [], "http://x/v1", "m")
    assert rule["tool_mode"] == "hermes" and all(u["base_url"] == "http://x/v1" for u in rules["upstreams"].values())


def test_the_options_are_checked() -> None:
    assert parse_args(["--tasks", "calculator", "--frameworks", "openai"]).repeat == 1
    with pytest.raises(SystemExit):
        parse_args(["--tasks", "nope"])


def test_llamaindex_gets_the_tool_schema_as_a_model() -> None:
    schema = _pydantic_model(TOOLS["convert_length"]).model_json_schema()
    assert schema["required"] == ["value", "from_unit", "to_unit"]
    assert schema["properties"]["from_unit"]["enum"] == ["miles", "kilometers"]
    toppings = _pydantic_model(TOOLS["order_pizza"]).model_json_schema()["properties"]["toppings"]
    assert toppings["type"] == "array" and toppings["items"] == {"type": "string"}
    contact = _pydantic_model(TOOLS["create_contact"]).model_json_schema()
    nested = contact["$defs"][contact["properties"]["contact"]["$ref"].rsplit("/", 1)[1]]
    assert nested["required"] == ["name", "phone"]


def test_a_results_file_is_judged_again_with_the_current_checks(tmp_path: Path) -> None:
    calls, _ = GOOD["calendar"]
    record = LoopRecord("openai", "calendar", 0, kind="ok", correct=True, answer="It was not added to the calendar.")
    record.calls = [str(call) for call in run_calls(calls).calls]
    capped = LoopRecord("langgraph", "calendar", 0, kind="capped", calls=record.calls)
    path = tmp_path / "loops.json"
    path.write_text(json.dumps({"loops": [asdict(record), asdict(capped)]}))
    table = rejudge(path)
    assert "| openai | A |" in table and "| langgraph | C |" in table
    assert [r["kind"] for r in json.loads(path.read_text())["loops"]] == ["wrong_answer", "capped"]


async def test_resumed_runs_skip_the_loops_done() -> None:
    done = [LoopRecord(fw, "no_tool", 0, kind="ok", correct=True) for fw in ("openai", "langgraph")]
    bench = SimpleNamespace()  # no loop is left to run, so nothing of the stack is touched
    records = await run_all(bench, ["openai", "langgraph"], [TASKS_BY_NAME["no_tool"]], 1, quiet=True, done=done)  # type: ignore[arg-type]
    assert records == done


def test_the_chart_is_an_svg_with_one_bar_per_row() -> None:
    import xml.etree.ElementTree as ET

    from bench.charts import bar_chart

    svg = ET.fromstring(bar_chart("Loops <correct>", [("openai", 0.5), ("all", 1.2)], note="a & b"))
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in svg.iter(f"{ns}rect") if r.get("fill") == "#3b7dd8"]
    assert [float(b.get("width", "0")) for b in bars] == [180.0, 360.0]  # shares are clipped to 100%
    texts = [t.text for t in svg.iter(f"{ns}text")]
    assert "Loops <correct>" in texts and "50%" in texts and "100%" in texts and "a & b" in texts


def test_a_booking_answer_that_says_it_went_through_fails() -> None:
    box = run_calls(GOOD["table_full"][0])
    task = TASKS_BY_NAME["table_full"]
    assert task.judge("Luigi's was not fully booked at 20:00.", box.calls) != []
    assert task.judge("Your table at Luigi's is booked.", box.calls) != []
    assert task.judge("Sorry, Luigi's is fully booked at 20:00.", box.calls) == []


def test_a_yes_no_question_about_a_book_is_judged_by_its_answer() -> None:
    calls, _ = GOOD["dune_copies"]
    box = run_calls(calls)
    judge = TASKS_BY_NAME["dune_copies"].judge
    assert judge("The library has Dune on the shelf.", box.calls) == []
    assert judge("Yes, 2 copies.", box.calls) == []
    assert judge("The library doesn't have Dune.", box.calls) != []
    assert judge("Dune is not available.", box.calls) != []


def test_a_refused_renewal_is_read_in_its_wordings() -> None:
    calls, _ = GOOD["renew_refused"]
    box = run_calls(calls)
    judge = TASKS_BY_NAME["renew_refused"].judge
    assert judge("The book could not be renewed because another reader reserved it.", box.calls) == []
    assert judge("I was unable to renew it.", box.calls) == []
    assert judge("Your book has been renewed.", box.calls) != []


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ("No: train 6611 to Lyon is 25 minutes late.", True),
        ("Your train 6611 is not on time today.", True),
        ("Train 6611 isn't on time: it is delayed.", True),
        ("Yes, train 6611 is on time.", False),
        ("I could not find that train.", False),
    ],
)
def test_the_late_train_check(answer: str, right: bool) -> None:
    box = run_calls([("get_train_status", {"train_number": "6611"})])
    assert (TASKS_BY_NAME["late_train"].judge(answer, box.calls) == []) is right
