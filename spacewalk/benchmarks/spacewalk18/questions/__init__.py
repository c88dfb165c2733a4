"""Spacewalk-18 as multiple-choice questions: video QA (`question_answering`, with `question_generator` for any
recordings), step recognition posed as a question (`step_recognition_questions`), Table 4's summaries
(`summaries`), and QA read off a decoded step timeline (`plan_reading`, model=mc_plan)."""
