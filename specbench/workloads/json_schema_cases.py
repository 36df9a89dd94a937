"""The JSON workload's cases: a request (what a user asks) and the schema its answer must follow, in realistic shapes:
flat records, nested objects, enums, arrays, numbers with bounds, and tool calls. Written for specbench (issue 46);
bump JsonSchemaWorkload.version when a case changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SchemaCase:
    case_id: str
    category: str  # "record" | "nested" | "enum" | "array" | "numeric" | "tool_call"
    request: str  # the user's message
    schema: dict[str, Any] | None = None  # the answer's JSON schema (None for tool calls)
    tools: tuple[dict[str, Any], ...] = ()  # tool_call: OpenAI function tools, one of which must be called


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties),
            "additionalProperties": False}


STR, INT, NUM, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}


def _str(max_len: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_len}


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


CASES: tuple[SchemaCase, ...] = (
    # ---- flat records -------------------------------------------------------------------------------------------
    SchemaCase("person", "record", "Describe a fictional person: name, age and email.",
               _obj({"name": _str(40), "age": {"type": "integer", "minimum": 0, "maximum": 120}, "email": _str(60)})),
    SchemaCase("book", "record", "Give a classic novel with its title, author and publication year.",
               _obj({"title": _str(80), "author": _str(60), "year": {"type": "integer", "minimum": 1000,
                                                                      "maximum": 2025}})),
    SchemaCase("city", "record", "Name a European capital with its country and approximate population.",
               _obj({"city": _str(40), "country": _str(40), "population": {"type": "integer", "minimum": 0}})),
    SchemaCase("movie_review", "record", "Review a film you like in one sentence, with a score out of 10.",
               _obj({"film": _str(60), "review": _str(200), "score": {"type": "integer", "minimum": 0,
                                                                      "maximum": 10}})),
    SchemaCase("contact", "record", "Create a contact card for a plumber.",
               _obj({"name": _str(40), "phone": {"type": "string", "pattern": "^[0-9+ -]{7,16}$"},
                     "available": BOOL})),
    SchemaCase("flight", "record", "Make up a flight booking from Paris to Tokyo.",
               _obj({"flight_number": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2,4}$"}, "origin": _str(40),
                     "destination": _str(40), "seats": {"type": "integer", "minimum": 1, "maximum": 9}})),
    # ---- nested objects -----------------------------------------------------------------------------------------
    SchemaCase("order", "nested", "Write an online order for two items shipped to Berlin.",
               _obj({"order_id": _str(20), "customer": _obj({"name": _str(40), "email": _str(60)}),
                     "shipping": _obj({"street": _str(60), "city": _str(40), "zip": _str(10)})})),
    SchemaCase("company", "nested", "Describe a small software company and its CEO.",
               _obj({"name": _str(40), "founded": {"type": "integer", "minimum": 1900, "maximum": 2025},
                     "ceo": _obj({"name": _str(40), "age": {"type": "integer", "minimum": 18, "maximum": 99}}),
                     "headquarters": _obj({"city": _str(40), "country": _str(40)})})),
    SchemaCase("recipe_meta", "nested", "Give the metadata of a pancake recipe.",
               _obj({"title": _str(60), "timing": _obj({"prep_minutes": {"type": "integer", "minimum": 0,
                                                                          "maximum": 600},
                                                         "cook_minutes": {"type": "integer", "minimum": 0,
                                                                          "maximum": 600}}),
                     "serves": {"type": "integer", "minimum": 1, "maximum": 20}})),
    SchemaCase("event", "nested", "Plan a team offsite: title, venue and organiser.",
               _obj({"title": _str(60), "venue": _obj({"name": _str(60), "address": _obj({"city": _str(40),
                                                                                           "country": _str(40)})}),
                     "organiser": _obj({"name": _str(40), "team": _str(40)})})),
    SchemaCase("server_config", "nested", "Write a web server configuration with TLS settings.",
               _obj({"host": _str(60), "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                     "tls": _obj({"enabled": BOOL, "min_version": {"enum": ["1.2", "1.3"]}})})),
    # ---- enums --------------------------------------------------------------------------------------------------
    SchemaCase("sentiment", "enum", "Classify the sentiment of: 'The service was slow but the food was great.'",
               _obj({"sentiment": {"enum": ["positive", "negative", "mixed", "neutral"]},
                     "confidence": {"enum": ["low", "medium", "high"]}})),
    SchemaCase("ticket_triage", "enum", "Triage this ticket: 'The login page shows a 500 error for all users.'",
               _obj({"priority": {"enum": ["p0", "p1", "p2", "p3"]},
                     "component": {"enum": ["auth", "billing", "frontend", "database"]},
                     "summary": _str(120)})),
    SchemaCase("language", "enum", "Which language is this: 'Wo ist der Bahnhof?'",
               _obj({"language": {"enum": ["english", "german", "french", "spanish", "italian"]},
                     "is_question": BOOL})),
    SchemaCase("traffic_light", "enum", "A pedestrian sees a red light. What should they do?",
               _obj({"action": {"enum": ["walk", "wait", "run"]}, "reason": _str(120)})),
    SchemaCase("weekday", "enum", "What day comes after Friday?",
               _obj({"day": {"enum": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]}})),
    # ---- arrays -------------------------------------------------------------------------------------------------
    SchemaCase("shopping_list", "array", "Write a shopping list for a pasta dinner.",
               _obj({"items": {"type": "array", "items": _str(30), "minItems": 1, "maxItems": 10}})),
    SchemaCase("todo", "array", "List three tasks for moving house, each with a done flag.",
               _obj({"tasks": {"type": "array", "maxItems": 5,
                               "items": _obj({"task": _str(60), "done": BOOL})}})),
    SchemaCase("ingredients", "array", "List the ingredients of a lemonade with quantities in grams.",
               _obj({"ingredients": {"type": "array", "maxItems": 8, "items": _obj({
                   "name": _str(30), "grams": {"type": "integer", "minimum": 0, "maximum": 5000}})}})),
    SchemaCase("tags", "array", "Suggest tags for a blog post about hiking in Norway.",
               _obj({"tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 6},
                     "language": {"enum": ["en", "no"]}})),
    SchemaCase("matrix", "array", "Give a 2 by 2 identity matrix.",
               _obj({"rows": {"type": "array", "maxItems": 2,
                              "items": {"type": "array", "maxItems": 2, "items": {"type": "integer"}}}})),
    SchemaCase("team_roster", "array", "Make a roster of a five-person football team with positions.",
               _obj({"team": _str(40), "players": {"type": "array", "maxItems": 5, "items": _obj({
                   "name": _str(40), "position": {"enum": ["goalkeeper", "defender", "midfielder", "forward"]}})}})),
    # ---- numbers ------------------------------------------------------------------------------------------------
    SchemaCase("coordinates", "numeric", "Give the latitude and longitude of Oslo.",
               _obj({"latitude": {"type": "number", "minimum": -90, "maximum": 90},
                     "longitude": {"type": "number", "minimum": -180, "maximum": 180}})),
    SchemaCase("invoice_total", "numeric", "An invoice has 3 items at 19.99 each with 20% VAT. Give the totals.",
               _obj({"subtotal": NUM, "vat": NUM, "total": NUM})),
    SchemaCase("temperature", "numeric", "Convert 25 degrees Celsius to Fahrenheit.",
               _obj({"celsius": NUM, "fahrenheit": NUM})),
    SchemaCase("stats", "numeric", "Give the mean and the median of 3, 7, 7, 10.",
               _obj({"mean": NUM, "median": NUM, "count": {"type": "integer", "minimum": 0}})),
    SchemaCase("product_price", "numeric", "Price a used bicycle, with a discount percentage.",
               _obj({"product": _str(40), "price": {"type": "number", "minimum": 0},
                     "discount_percent": {"type": "integer", "minimum": 0, "maximum": 100}, "in_stock": BOOL})),
    # ---- tool calls ---------------------------------------------------------------------------------------------
    SchemaCase("weather_call", "tool_call", "What is the weather in Lisbon in Celsius?", tools=(
        _tool("get_weather", "Current weather in a city",
              _obj({"city": _str(40), "unit": {"enum": ["celsius", "fahrenheit"]}})),
        _tool("get_time", "Current local time in a city", _obj({"city": _str(40)})))),
    SchemaCase("calendar_call", "tool_call", "Book a 30 minute meeting with Ana tomorrow at 10:00.", tools=(
        _tool("create_event", "Create a calendar event", _obj({
            "title": _str(60), "attendees": {"type": "array", "items": _str(40), "maxItems": 5},
            "start": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
            "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 480}})),
        _tool("cancel_event", "Cancel a calendar event", _obj({"event_id": _str(20)})))),
    SchemaCase("search_call", "tool_call", "Find recent papers on speculative decoding.", tools=(
        _tool("web_search", "Search the web", _obj({"query": _str(100), "max_results": {
            "type": "integer", "minimum": 1, "maximum": 20}})),)),
    SchemaCase("transfer_call", "tool_call", "Send 25.50 euros to Bob for lunch.", tools=(
        _tool("transfer_money", "Transfer money to a contact", _obj({
            "recipient": _str(40), "amount": {"type": "number", "minimum": 0},
            "currency": {"enum": ["EUR", "USD", "GBP"]}, "note": _str(60)})),
        _tool("get_balance", "The account balance", _obj({})))),
    SchemaCase("sql_call", "tool_call", "How many orders were placed last week? Use the database.", tools=(
        _tool("run_sql", "Run a read-only SQL query", _obj({"query": _str(200)})),)),
)
