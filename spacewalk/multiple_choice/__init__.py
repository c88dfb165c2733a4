"""Multiple-choice evaluation shared by Spacewalk-18 (QA, step recognition as a question), EgoSchema and
EgoCross: `items` (the item type every benchmark reader produces)."""
