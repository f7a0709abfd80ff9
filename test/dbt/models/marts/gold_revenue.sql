{{ config(materialized='table', schema='marts') }}
-- A table model in a custom schema: dbt creates public_marts and the
-- table in it, reading a model of public.
select tier, revenue
from {{ ref('tier_summary') }}
where tier = 'gold'
